// Package tracing is mcp-mux's part of a distributed trace: one span per
// request forwarded to a backend, a child of the agent's span when its
// _meta carries W3C trace context (traceparent, tracestate: SEP-414), and
// the trace context passed on to the backend naming mux's span as parent.
// Spans are sampled, batched and sent over OTLP/HTTP (protobuf) by this
// package, configured by the OpenTelemetry SDK's standard environment
// variables (OTEL_EXPORTER_OTLP_*, OTEL_TRACES_SAMPLER, OTEL_BSP_*,
// OTEL_RESOURCE_ATTRIBUTES...) with the SDK's meanings.
//
// It is its own small SDK rather than OpenTelemetry's: every mcp-mux
// process linked that, tracing or not, and paid for it in binary and in
// memory (its packages' inits and data), where mux needs one kind of span
// with string attributes.
//
// Tracing is on only when an OTLP endpoint is set: otherwise FromEnv
// returns nil, and mux does nothing of this per request (one nil check),
// leaving an agent's traceparent to pass through untouched.
package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The W3C trace context keys, in _meta as in HTTP headers.
const (
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
)

// BackendKey names the backend a span's request went to: mux's own
// attribute (the conventions have none for a multiplexer's backend).
const BackendKey = "mcp_mux.backend"

// The semantic conventions' keys mux writes, as in
// go.opentelemetry.io/otel/semconv/v1.41.0.
const (
	keyMCPMethodName         = "mcp.method.name"
	keyMCPProtocolVersion    = "mcp.protocol.version"
	keyMCPResourceURI        = "mcp.resource.uri"
	keyGenAIToolName         = "gen_ai.tool.name"
	keyGenAIOperationName    = "gen_ai.operation.name"
	keyGenAIPromptName       = "gen_ai.prompt.name"
	keyRPCResponseStatusCode = "rpc.response.status_code"
	keyErrorType             = "error.type"

	keyServiceName          = "service.name"
	keyServiceVersion       = "service.version"
	keyTelemetrySDKName     = "telemetry.sdk.name"
	keyTelemetrySDKLanguage = "telemetry.sdk.language"
	keyTelemetrySDKVersion  = "telemetry.sdk.version"

	operationExecuteTool = "execute_tool" // gen_ai.operation.name's
)

// instrumentationScope is the scope of mux's spans: the module.
const instrumentationScope = "github.com/mcp-mux/mcp-mux"

// exportTimeout bounds one export with its retries, unless
// OTEL_EXPORTER_OTLP_TIMEOUT (or its traces form) says otherwise (the
// specification's default, 10 s, is long for a batch held up): a
// collector that does not answer costs a batch, never a request (spans
// reach the exporter from the batch goroutine only).
const exportTimeout = 5 * time.Second

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), the SDK is not disabled
// (OTEL_SDK_DISABLED=true) and the traces exporter is not "none".
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv is the tracer the environment asks for, or nil when tracing is
// off (see Enabled). The exporter's configuration (endpoint, protocol,
// headers, timeout, compression, TLS) is the OTEL_EXPORTER_OTLP_*
// variables' (exporterConfigFromEnv): one it cannot follow, such as a
// protocol other than http/protobuf, is an error, and no tracer. The
// sampler, the batching and the span limits are configFromEnv's, the
// resource resourceFromEnv's. Warnings and export errors go to logger,
// never to stdout (the protocol's, when serving over stdio).
func FromEnv(getenv func(string) string, version string, logger *log.Logger) (*Tracer, error) {
	if !Enabled(getenv) {
		return nil, nil
	}
	warn := func(msg string, kv ...any) { logger.Warn(msg, kv...) }
	cfg, err := exporterConfigFromEnv(getenv, warn)
	if err != nil {
		return nil, err
	}
	failed := exportErrors(logger)
	// The exporter makes no connection yet: an unreachable collector is
	// found out by the first export, in the batch goroutine.
	exp := newExporter(cfg, version, failed)
	res := resourceFromEnv(getenv, version, warn)
	sc := scope{name: instrumentationScope, version: version}
	t := newTracer(configFromEnv(getenv, warn), func(ctx context.Context, spans []*spanData) error {
		return exp.Export(ctx, encodeTraces(res, sc, spans))
	}, failed, logger)
	t.exp = exp
	return t, nil
}

// exportErrors is what an export's error is told to: logger, the first
// one as a warning (a collector that is down, or refuses), the rest at
// debug (one per failed batch would fill the log).
func exportErrors(logger *log.Logger) func(error) {
	var warned atomic.Bool
	return func(err error) {
		// The exporter's errors name the endpoint's URL, which may have a
		// password in it.
		msg := userinfo.ReplaceAllString(err.Error(), "$1***@")
		if warned.CompareAndSwap(false, true) {
			logger.Warn("exporting traces failed (later failures are logged at debug level)", "err", msg)
			return
		}
		logger.Debug("exporting traces failed", "err", msg)
	}
}

// userinfo matches the user (and password) part of a URL.
var userinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@`)

// Request is what a span says of one forwarded request.
type Request struct {
	Method  string // the MCP method
	Backend string // the backend's name in the config
	Target  string // the tool or prompt name the agent called, or the URI
	// Version is the protocol version mux speaks with the backend.
	Version string
}

// Span is one forwarded request's span.
type Span struct {
	// Traceparent and Tracestate are the W3C trace context the backend
	// gets: naming this span as the parent.
	Traceparent, Tracestate string

	t     *Tracer // nil: not sampled, nothing is recorded
	data  spanData
	ended atomic.Bool
}

// Start begins the span of req, a child of the trace context in meta (the
// agent's _meta, as the backend would get it) or the root of a new trace,
// and returns it with the _meta the backend gets instead: meta's, its
// traceparent naming the new span (and the tracestate passed on). meta
// itself is not changed.
func (t *Tracer) Start(req Request, meta map[string]any) (*Span, map[string]any) {
	tp, _ := meta[KeyTraceparent].(string)
	p, hasParent := parseTraceparent(tp)
	trace := p.trace
	if hasParent {
		// The agent's tracestate goes on only with its trace (as the
		// propagator parsed it): not with a new one, when its
		// traceparent was not valid.
		ts, _ := meta[KeyTracestate].(string)
		p.state = parseTracestate(ts)
	} else {
		trace = newTraceID()
	}
	id := newSpanID()
	// The parent's flags go on (the random flag says how its trace id was
	// made), but for sampled: this span's.
	flags := p.flags &^ flagSampled
	sampled := t.cfg.sampler.sampled(trace, p, hasParent)
	if sampled {
		flags |= flagSampled
	}

	s := &Span{Traceparent: formatTraceparent(trace, id, flags), Tracestate: p.state}
	out := make(map[string]any, len(meta)+2)
	for k, v := range meta {
		out[k] = v
	}
	delete(out, KeyTracestate)
	out[KeyTraceparent] = s.Traceparent
	if s.Tracestate != "" {
		out[KeyTracestate] = s.Tracestate
	}
	if !sampled {
		return s, out
	}

	s.t = t
	d := &s.data
	d.trace, d.span, d.flags, d.traceState = trace, id, flags, p.state
	if hasParent {
		d.parent = p.span
	}
	d.start = time.Now()
	d.attrs = make([]keyValue, 0, 7)
	d.attrs = append(d.attrs, keyValue{keyMCPMethodName, req.Method}, keyValue{BackendKey, req.Backend})
	if req.Version != "" {
		d.attrs = append(d.attrs, keyValue{keyMCPProtocolVersion, req.Version})
	}
	d.name = req.Method
	switch req.Method {
	case "tools/call":
		d.name += " " + req.Target
		d.attrs = append(d.attrs, keyValue{keyGenAIToolName, req.Target}, keyValue{keyGenAIOperationName, operationExecuteTool})
	case "prompts/get":
		d.name += " " + req.Target
		d.attrs = append(d.attrs, keyValue{keyGenAIPromptName, req.Target})
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if req.Target != "" {
			d.attrs = append(d.attrs, keyValue{keyMCPResourceURI, req.Target})
		}
	}
	return s, out
}

// End ends the span with the request's outcome: err, the error the agent
// gets (its JSON-RPC code as the status code), or a result, which for a
// tool call may be a tool error (isError). A span ends once: End again
// does nothing.
func (s *Span) End(err error, result any) {
	if s.t == nil || !s.ended.CompareAndSwap(false, true) {
		return
	}
	d := &s.data
	if err != nil {
		code := "-32603"
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			code = strconv.FormatInt(je.Code, 10)
		}
		d.attrs = append(d.attrs, keyValue{keyRPCResponseStatusCode, code}, keyValue{keyErrorType, code})
		d.statusError, d.statusMessage = true, err.Error()
	} else if toolError(result) {
		d.attrs = append(d.attrs, keyValue{keyErrorType, "tool_error"})
		d.statusError, d.statusMessage = true, "the tool's result is an error (isError)"
	}
	// On the monotonic clock: a wall clock set back mid-request does not
	// make the span end before it began.
	d.end = d.start.Add(time.Since(d.start))
	s.t.cfg.limits.apply(d)
	s.t.enqueue(d)
}

// toolError reports whether result, a backend's result as it sent it,
// says isError.
func toolError(result any) bool {
	raw, ok := result.(json.RawMessage)
	if !ok || !strings.Contains(string(raw), `"isError"`) {
		return false
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(raw, &r) == nil && r.IsError
}
