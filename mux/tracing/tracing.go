// Package tracing is mcp-mux's part of a distributed trace: one span per
// request forwarded to a backend, a child of the agent's span when its
// _meta carries W3C trace context (traceparent, tracestate: SEP-414), and
// the trace context passed on to the backend naming mux's span as parent.
// Spans are made and batched by the OpenTelemetry SDK and go out over
// OTLP/HTTP (protobuf) by an exporter of this package's (exporter.go),
// configured by the standard OTEL_EXPORTER_OTLP_* environment variables.
//
// Tracing is on only when an OTLP endpoint is set: otherwise FromEnv
// returns nil, and mux does nothing of this per request (one nil check),
// leaving an agent's traceparent to pass through untouched.
package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context keys, in _meta as in HTTP headers.
const (
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
)

// BackendKey names the backend a span's request went to: mux's own
// attribute (the conventions have none for a multiplexer's backend).
const BackendKey = attribute.Key("mcp_mux.backend")

// Tracer makes the spans of forwarded requests and exports them.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	exp    *exporter // nil in tests with an exporter of their own
}

// exportTimeout bounds one export with its retries, unless
// OTEL_EXPORTER_OTLP_TIMEOUT (or its traces form) says otherwise (the
// specification's default, 10 s, is long for a batch held up): a
// collector that does not answer costs a batch, never a request (spans
// reach the exporter from the batch processor's goroutine only).
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
// resource is OTEL_SERVICE_NAME's and OTEL_RESOURCE_ATTRIBUTES'. The
// SDK's errors go to logger, never to stdout (the protocol's, when
// serving over stdio).
func FromEnv(getenv func(string) string, version string, logger *log.Logger) (*Tracer, error) {
	if !Enabled(getenv) {
		return nil, nil
	}
	cfg, err := exporterConfigFromEnv(getenv, func(msg string, kv ...any) { logger.Warn(msg, kv...) })
	if err != nil {
		return nil, err
	}
	routeErrors(logger)
	// The exporter makes no connection yet: an unreachable collector is
	// found out by the first export, in the batch processor's goroutine.
	exp := newExporter(cfg, version, otel.Handle)
	res, err := resource.New(context.Background(),
		resource.WithAttributes(semconv.ServiceName("mcp-mux"), semconv.ServiceVersion(version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("describing mcp-mux for traces: %w", err)
	}
	// The batch processor's queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE,
	// 2048 spans by default) and drops what does not fit: a request
	// never waits for it. Its other settings and the sampler
	// (OTEL_TRACES_SAMPLER) come from the environment as well.
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp))
	return &Tracer{tp: tp, tracer: tp.Tracer("github.com/mcp-mux/mcp-mux", trace.WithInstrumentationVersion(version)), exp: exp}, nil
}

// errorsRouted: the SDK's global error handler and logger are set once.
var errorsRouted atomic.Bool

// routeErrors sends the SDK's errors to logger: the first one as a
// warning (a collector that is down, or refuses), the rest at debug (one
// per failed batch would fill the log). Its own logger (stderr by
// default) is silenced: everything it says, the handler says too.
func routeErrors(logger *log.Logger) {
	if !errorsRouted.CompareAndSwap(false, true) {
		return
	}
	var warned atomic.Bool
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		// The exporter's errors name the endpoint's URL, which may have a
		// password in it.
		msg := userinfo.ReplaceAllString(err.Error(), "$1***@")
		if warned.CompareAndSwap(false, true) {
			logger.Warn("exporting traces failed (later failures are logged at debug level)", "err", msg)
			return
		}
		logger.Debug("exporting traces failed", "err", msg)
	}))
	otel.SetLogger(logr.Discard())
}

// userinfo matches the user (and password) part of a URL.
var userinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@`)

// Shutdown exports what is queued and stops the exporter, taking at most
// timeout: mcp-mux's exit is not held up by a collector. An export still
// in flight then (a collector that is slow, or down and retried) is ended.
func (t *Tracer) Shutdown(timeout time.Duration) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = t.tp.Shutdown(ctx)
	if t.exp != nil {
		_ = t.exp.Shutdown(ctx)
	}
}

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
	span trace.Span
	// Traceparent and Tracestate are the W3C trace context the backend
	// gets: naming this span as the parent.
	Traceparent, Tracestate string
}

// metaCarrier reads and writes the trace context in a request's _meta.
type metaCarrier map[string]any

func (c metaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c metaCarrier) Set(key, value string) { c[key] = value }

func (c metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

var propagator = propagation.TraceContext{}

// Start begins the span of req, a child of the trace context in meta (the
// agent's _meta, as the backend would get it) or the root of a new trace,
// and returns it with the _meta the backend gets instead: meta's, its
// traceparent naming the new span (and the tracestate passed on). meta
// itself is not changed.
func (t *Tracer) Start(ctx context.Context, req Request, meta map[string]any) (*Span, map[string]any) {
	ctx = propagator.Extract(ctx, metaCarrier(meta))
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, semconv.McpMethodNameKey.String(req.Method), BackendKey.String(req.Backend))
	if req.Version != "" {
		attrs = append(attrs, semconv.McpProtocolVersion(req.Version))
	}
	name := req.Method
	switch req.Method {
	case "tools/call":
		name += " " + req.Target
		attrs = append(attrs, semconv.GenAIToolName(req.Target), semconv.GenAIOperationNameExecuteTool)
	case "prompts/get":
		name += " " + req.Target
		attrs = append(attrs, semconv.GenAIPromptName(req.Target))
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if req.Target != "" {
			attrs = append(attrs, semconv.McpResourceURI(req.Target))
		}
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	out := make(metaCarrier, len(meta)+2)
	for k, v := range meta {
		out[k] = v
	}
	// The agent's tracestate goes on only with its trace (as the
	// propagator parsed it): not with a new one, when its traceparent was
	// not valid.
	delete(out, KeyTraceparent)
	delete(out, KeyTracestate)
	propagator.Inject(ctx, out)
	s := &Span{span: span, Traceparent: out.Get(KeyTraceparent), Tracestate: out.Get(KeyTracestate)}
	return s, out
}

// End ends the span with the request's outcome: err, the error the agent
// gets (its JSON-RPC code as the status code), or a result, which for a
// tool call may be a tool error (isError).
func (s *Span) End(err error, result any) {
	if err != nil {
		code := "-32603"
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			code = strconv.FormatInt(je.Code, 10)
		}
		s.span.SetAttributes(semconv.RPCResponseStatusCode(code), semconv.ErrorTypeKey.String(code))
		s.span.SetStatus(codes.Error, err.Error())
	} else if toolError(result) {
		s.span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
		s.span.SetStatus(codes.Error, "the tool's result is an error (isError)")
	}
	s.span.End()
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
