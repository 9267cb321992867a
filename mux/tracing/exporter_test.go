package tracing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// testExporter is an exporter to url (a receiver's, /v1/traces added),
// as FromEnv would make it, with timeout for an export.
func testExporter(t *testing.T, endpoint string, timeout time.Duration, report func(error)) *exporter {
	t.Helper()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_TIMEOUT": fmt.Sprint(timeout.Milliseconds())}
	cfg, err := exporterConfigFromEnv(func(k string) string { return env[k] }, noWarn(t))
	if err != nil {
		t.Fatal(err)
	}
	e := newExporter(cfg, "test", report)
	t.Cleanup(e.Shutdown)
	return e
}

func noWarn(t *testing.T) func(string, ...any) {
	return func(msg string, kv ...any) { t.Errorf("warned: %s %v", msg, kv) }
}

var (
	traceA  = traceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	traceB  = traceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	spanA   = spanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	spanB   = spanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}
	spanC   = spanID{1, 2, 3, 4, 5, 6, 7, 8}
	parentA = spanID{8, 7, 6, 5, 4, 3, 2, 1}
	start   = time.Unix(1700000000, 123456789)
)

// testSpans are spans with every field the encoder writes set (and, in
// the others, left out), with their resource and scope; and the request
// the official types should decode from their export.
func testSpans() (resource, scope, []*spanData, *coltracepb.ExportTraceServiceRequest) {
	long := strings.Repeat("ü", 9000) // a length of three varint bytes
	res := resource{schemaURL: "https://opentelemetry.io/schemas/1.43.0", attrs: []keyValue{
		{"service.name", "mcp-mux"}, {"service.version", "1.2.3"}, {"z", ""},
	}}
	sc := scope{name: "github.com/mcp-mux/mcp-mux", version: "1.2.3"}
	spans := []*spanData{
		{
			trace: traceA, span: spanA, parent: parentA, traceState: "vendor=t61rcWkgMzE,other=1", flags: flagSampled,
			name:  "tools/call notes__echo",
			start: start, end: start.Add(1500 * time.Microsecond),
			attrs: []keyValue{
				{"mcp.method.name", "tools/call"},
				{"empty", ""},
				{"not.utf8", "a\xffb"},
				{"long", long},
			},
			droppedAttrs:  3,
			statusError:   true,
			statusMessage: "backend said -32602: bad",
		},
		{
			// the root of a trace: no parent, nothing but what every span has
			trace: traceB, span: spanB, flags: flagSampled,
			name:  "ping",
			start: start, end: start,
		},
		{
			trace: traceB, span: spanC, parent: spanB, flags: flagSampled | flagRandom,
			name:  "resources/read",
			start: start, end: start.Add(time.Second),
			statusError: true, // with no message
		},
	}

	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	kv := func(k string, v *commonpb.AnyValue) *commonpb.KeyValue { return &commonpb.KeyValue{Key: k, Value: v} }
	nano := func(t time.Time) uint64 { return uint64(t.UnixNano()) }
	const hasIsRemote, isRemote = 0x100, 0x200

	want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			kv("service.name", str("mcp-mux")), kv("service.version", str("1.2.3")), kv("z", str("")),
		}},
		SchemaUrl: "https://opentelemetry.io/schemas/1.43.0",
		ScopeSpans: []*tracepb.ScopeSpans{{
			Scope: &commonpb.InstrumentationScope{Name: "github.com/mcp-mux/mcp-mux", Version: "1.2.3"},
			Spans: []*tracepb.Span{
				{
					TraceId:           traceA[:],
					SpanId:            spanA[:],
					TraceState:        "vendor=t61rcWkgMzE,other=1",
					ParentSpanId:      parentA[:],
					Flags:             0x01 | hasIsRemote | isRemote,
					Name:              "tools/call notes__echo",
					Kind:              tracepb.Span_SPAN_KIND_CLIENT,
					StartTimeUnixNano: nano(start),
					EndTimeUnixNano:   nano(start.Add(1500 * time.Microsecond)),
					Attributes: []*commonpb.KeyValue{
						kv("mcp.method.name", str("tools/call")),
						kv("empty", str("")),
						kv("not.utf8", str("a\uFFFDb")),
						kv("long", str(long)),
					},
					DroppedAttributesCount: 3,
					Status:                 &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "backend said -32602: bad"},
				},
				{
					TraceId: traceB[:], SpanId: spanB[:], Flags: 0x01 | hasIsRemote,
					Name: "ping", Kind: tracepb.Span_SPAN_KIND_CLIENT,
					StartTimeUnixNano: nano(start), EndTimeUnixNano: nano(start),
				},
				{
					TraceId: traceB[:], SpanId: spanC[:], ParentSpanId: spanB[:], Flags: 0x03 | hasIsRemote | isRemote,
					Name: "resources/read", Kind: tracepb.Span_SPAN_KIND_CLIENT,
					StartTimeUnixNano: nano(start), EndTimeUnixNano: nano(start.Add(time.Second)),
					Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR},
				},
			},
		}},
	}}}
	return res, sc, spans, want
}

// testBody is the encoded request of testSpans.
func testBody() []byte {
	res, sc, spans, _ := testSpans()
	return encodeTraces(res, sc, spans)
}

// Every field the encoder writes, as the official OTLP types decode it at
// the receiver: string attributes (and an empty one, one that is not
// UTF-8, one long enough for a 3-byte length), status with and without a
// message, kind, parent or none, trace state, flags (sampled, random,
// remote parent), dropped attributes, resource attributes and schema URL,
// scope.
func TestExportedSpansDecodeWithTheOfficialTypes(t *testing.T) {
	rcv := testkit.StartOTLPReceiver(t)
	_, _, _, want := testSpans()
	e := testExporter(t, rcv.URL, 5*time.Second, nil)
	if err := e.Export(context.Background(), testBody()); err != nil {
		t.Fatal(err)
	}
	exports := rcv.Exports()
	if len(exports) != 1 {
		t.Fatalf("%d exports, want 1", len(exports))
	}
	if got := exports[0].Request; !proto.Equal(got, want) {
		t.Errorf("the receiver decoded:\n%s\nwant:\n%s", prototext.Format(got), prototext.Format(want))
	}
	h := exports[0].Header
	if h.Get("Content-Type") != "application/x-protobuf" || h.Get("User-Agent") != "mcp-mux/test" || h.Get("Content-Encoding") != "" {
		t.Errorf("headers %v, want Content-Type application/x-protobuf, User-Agent mcp-mux/test, not compressed", h)
	}
}

// The encoder writes what the generated types would, byte for byte: the
// same fields in the same order (a collector sees no difference).
func TestEncodingIsTheGeneratedTypesOwn(t *testing.T) {
	_, _, _, want := testSpans()
	if got, gen := testBody(), mustMarshal(t, want); !bytes.Equal(got, gen) {
		t.Errorf("encoded %d bytes, the generated types %d, and they differ", len(got), len(gen))
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExporterConfigFromEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		url  string
		err  string // in the error, if one is wanted
	}{
		{"base URL", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces", ""},
		{"base URL with a slash", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318/"}, "https://c:4318/v1/traces", ""},
		{"base URL with a path", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c/otlp/"}, "https://c/otlp/v1/traces", ""},
		{"traces URL as is", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom/path?x=1"}, "http://c:4318/custom/path?x=1", ""},
		{"traces URL without a path", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318"}, "http://c:4318/", ""},
		{"traces URL first", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://base", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces/t"}, "http://traces/t", ""},
		{"not http", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://c:4318"}, "", "want an http:// or https:// URL"},
		{"no scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, "", "OTEL_EXPORTER_OTLP_ENDPOINT is 127.0.0.1:4318, which has no scheme: write http://127.0.0.1:4318"},
		{"a name without a scheme", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318"}, "", "write http://collector:4318"},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "", `OTEL_EXPORTER_OTLP_PROTOCOL is "grpc"`},
		{"json", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "", `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is "http/json"`},
		{"traces protocol first", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, "http://c/v1/traces", ""},
		{"missing CA file", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"}, "", "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{"a client key without its certificate", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "/k.pem"}, "", "without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := exporterConfigFromEnv(func(k string) string { return c.env[k] }, noWarn(t))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || cfg.URL.String() != c.url {
				t.Errorf("URL %v (err %v), want %s", cfg, err, c.url)
			}
		})
	}
}

// An endpoint that is not a URL mcp-mux can use is named, never shown
// where it may hold a password.
func TestExporterConfigNeverShowsAnEndpointsPassword(t *testing.T) {
	for _, endpoint := range []string{"user:s3cret@c:4318", "https://user:s3cret@", "ftp://user:s3cret@c", "http://user:s3cret@c:43 18"} {
		_, err := exporterConfigFromEnv(func(k string) string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}[k]
		}, noWarn(t))
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_ENDPOINT") {
			t.Errorf("%s: error %v, want one naming the variable without its password", endpoint, err)
		}
	}
}

func TestExporterConfigHeadersTimeoutCompression(t *testing.T) {
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":    "http://c",
		"OTEL_EXPORTER_OTLP_HEADERS":     "authorization=Basic%20czNjcmV0, x-tenant = a%2Cb ,bad header=x,Bearer czNjcmV0",
		"OTEL_EXPORTER_OTLP_TIMEOUT":     "1500",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
	}
	var warnings []string
	warn := func(msg string, kv ...any) { warnings = append(warnings, fmt.Sprint(msg, kv)) }
	cfg, err := exporterConfigFromEnv(func(k string) string { return env[k] }, warn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Header.Get("Authorization") != "Basic czNjcmV0" || cfg.Header.Get("X-Tenant") != "a,b" || len(cfg.Header) != 2 {
		t.Errorf("headers %v, want authorization and x-tenant, URL-decoded", cfg.Header)
	}
	if len(warnings) != 2 || strings.Contains(strings.Join(warnings, " "), "czNjcmV0") {
		t.Errorf("warnings %q, want one for each of the two bad entries, no value shown", warnings)
	}
	if cfg.Timeout != 1500*time.Millisecond || !cfg.Gzip {
		t.Errorf("timeout %v gzip %v, want 1.5s and gzip", cfg.Timeout, cfg.Gzip)
	}

	// The traces forms win; a timeout left unset is ours, 5 s.
	env = map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":           "http://c",
		"OTEL_EXPORTER_OTLP_HEADERS":            "a=1",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS":     "b=2",
		"OTEL_EXPORTER_OTLP_COMPRESSION":        "gzip",
		"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none",
	}
	cfg, err = exporterConfigFromEnv(func(k string) string { return env[k] }, noWarn(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Header.Get("B") != "2" || cfg.Header.Get("A") != "" || cfg.Gzip || cfg.Timeout != exportTimeout {
		t.Errorf("headers %v gzip %v timeout %v, want the traces forms' (b=2, none) and %v", cfg.Header, cfg.Gzip, cfg.Timeout, exportTimeout)
	}
}

// envOf is getenv over env and, for the other variables, nothing: the
// test's own OTEL_* environment does not count.
func envOf(env map[string]string) func(string) string { return func(k string) string { return env[k] } }

// quietLogger is a logger into buf.
func quietLogger(buf *syncBuffer) *log.Logger {
	return log.NewWithOptions(buf, log.Options{Level: log.DebugLevel})
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Through FromEnv: the headers of OTEL_EXPORTER_OTLP_HEADERS reach the
// collector, a gzipped body decodes, and the traces URL is used as is
// (the base URL, which would be used otherwise, goes nowhere).
func TestFromEnvSendsHeadersGzippedToTheTracesURL(t *testing.T) {
	rcv := testkit.StartOTLPReceiver(t)
	var logs syncBuffer
	tr, err := FromEnv(envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://127.0.0.1:1",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.URL + "/v1/traces",
		"OTEL_EXPORTER_OTLP_HEADERS":         "authorization=Bearer%20s3cret,x-tenant=t1",
		"OTEL_EXPORTER_OTLP_COMPRESSION":     "gzip",
	}), "9.9.9", quietLogger(&logs))
	if err != nil || tr == nil {
		t.Fatalf("FromEnv: %v %v", tr, err)
	}
	span, _ := tr.Start(Request{Method: "tools/call", Backend: "fx", Target: "fx__echo"}, nil)
	span.End(nil, nil)
	tr.Shutdown(5 * time.Second) // flushes the queue
	exports := rcv.Exports()
	if len(exports) != 1 {
		t.Fatalf("%d exports, want 1; log:\n%s", len(exports), logs.String())
	}
	h := exports[0].Header
	if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Tenant") != "t1" || h.Get("Content-Encoding") != "gzip" || h.Get("User-Agent") != "mcp-mux/9.9.9" {
		t.Errorf("headers %v, want the configured ones, gzip and mcp-mux's User-Agent", h)
	}
	rs := exports[0].Request.GetResourceSpans()
	if len(rs) != 1 || len(rs[0].ScopeSpans) != 1 || len(rs[0].ScopeSpans[0].Spans) != 1 || rs[0].ScopeSpans[0].Spans[0].Name != "tools/call fx__echo" {
		t.Fatalf("received %s", prototext.Format(exports[0].Request))
	}
	if sc := rs[0].ScopeSpans[0].Scope; sc.GetName() != "github.com/mcp-mux/mcp-mux" || sc.GetVersion() != "9.9.9" {
		t.Errorf("scope %v, want mcp-mux's, its version", sc)
	}
	var res []string
	for _, kv := range rs[0].GetResource().GetAttributes() {
		res = append(res, kv.Key+"="+kv.GetValue().GetStringValue())
	}
	if got := strings.Join(res, " "); got != "service.name=mcp-mux service.version=9.9.9 telemetry.sdk.language=go telemetry.sdk.name=mcp-mux telemetry.sdk.version=9.9.9" ||
		rs[0].SchemaUrl != resourceSchemaURL {
		t.Errorf("resource %s (schema %s), want mcp-mux's", got, rs[0].SchemaUrl)
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("the log shows a header's value:\n%s", logs.String())
	}
}

// A protocol mcp-mux does not speak turns tracing off with the reason,
// rather than send what the collector cannot read.
func TestFromEnvWithAnUnsupportedProtocolIsAnError(t *testing.T) {
	for _, p := range []string{"grpc", "http/json"} {
		var logs syncBuffer
		tr, err := FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": p}), "t", quietLogger(&logs))
		if tr != nil || err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "http/protobuf") {
			t.Errorf("protocol %s: tracer %v, error %v; want none, and an error naming %s and http/protobuf", p, tr, err, p)
		}
	}
}

// A 503 is retried, and the spans arrive; Retry-After is waited for.
func TestExportRetriesAnUnavailableCollector(t *testing.T) {
	rcv := testkit.StartOTLPReceiver(t)
	var reported []error
	e := testExporter(t, rcv.URL, 5*time.Second, func(err error) { reported = append(reported, err) })
	body := testBody()

	rcv.FailNext(testkit.Failure{Status: 503})
	if err := e.Export(context.Background(), body); err != nil {
		t.Fatal(err)
	}
	if rcv.Attempts() != 2 || len(rcv.Exports()) != 1 {
		t.Errorf("%d attempts, %d exports; want 2 and 1", rcv.Attempts(), len(rcv.Exports()))
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "503") {
		t.Errorf("reported %v, want the 503, once", reported)
	}

	rcv.FailNext(testkit.Failure{Status: 429, RetryAfter: "1"})
	begin := time.Now()
	if err := e.Export(context.Background(), body); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d < 900*time.Millisecond {
		t.Errorf("retried after %v, want the 1 s of Retry-After", d)
	}
	if len(rcv.Exports()) != 2 {
		t.Errorf("%d exports, want 2", len(rcv.Exports()))
	}
}

// Other errors fail the batch at once; a Retry-After past the export's
// deadline is not waited for.
func TestExportGivesUp(t *testing.T) {
	rcv := testkit.StartOTLPReceiver(t)
	e := testExporter(t, rcv.URL, time.Second, nil)
	body := testBody()

	rcv.FailNext(testkit.Failure{Status: 400})
	err := e.Export(context.Background(), body)
	if err == nil || !strings.Contains(err.Error(), "400") || rcv.Attempts() != 1 {
		t.Errorf("error %v after %d attempts, want a 400 after 1", err, rcv.Attempts())
	}

	rcv.FailNext(testkit.Failure{Status: 503, RetryAfter: "30"})
	begin := time.Now()
	err = e.Export(context.Background(), body)
	if err == nil || !strings.Contains(err.Error(), "deadline") || time.Since(begin) > 500*time.Millisecond {
		t.Errorf("error %v after %v, want one at once, for the deadline", err, time.Since(begin))
	}
}

// silentListener takes connections and never answers.
func silentListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return "http://" + ln.Addr().String()
}

// acceptingSilentListener is a collector that takes connections and
// never answers; accepted is closed once it has taken one.
func acceptingSilentListener(t *testing.T) (endpoint string, accepted <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	took := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if conns = append(conns, c); len(conns) == 1 {
				close(took)
			}
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return "http://" + ln.Addr().String(), took
}

// closedPort is an address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// A collector that is down or hangs costs an export its deadline at most,
// retries included; the first failure is reported at once.
func TestExportToAnUnreachableCollectorEndsByItsDeadline(t *testing.T) {
	body := testBody()
	for name, endpoint := range map[string]string{"closed port": closedPort(t), "silent": silentListener(t)} {
		t.Run(name, func(t *testing.T) {
			reported := make(chan error, 1)
			e := testExporter(t, endpoint, 700*time.Millisecond, func(err error) { reported <- err })
			begin := time.Now()
			err := e.Export(context.Background(), body)
			d := time.Since(begin)
			if err == nil || d > 3*time.Second {
				t.Errorf("error %v after %v, want one within the deadline (0.7 s)", err, d)
			}
			if name == "closed port" {
				select {
				case err := <-reported:
					if !strings.Contains(err.Error(), "retrying") {
						t.Errorf("reported %v", err)
					}
				default:
					t.Error("the first failure was not reported")
				}
			}
			t.Logf("%v after %v", err, d)
		})
	}
}

// Shutdown ends an export in flight, and the exporter takes no more.
func TestShutdownEndsAnExportInFlight(t *testing.T) {
	body := testBody()
	endpoint, accepted := acceptingSilentListener(t)
	e := testExporter(t, endpoint, 30*time.Second, nil)
	done := make(chan error, 1)
	go func() { done <- e.Export(context.Background(), body) }()
	select { // the export is in flight once its connection is taken
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the export never connected")
	}
	e.Shutdown()
	select {
	case err := <-done:
		if !errors.Is(err, errShutdown) {
			t.Errorf("export ended with %v, want %v", err, errShutdown)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the export goes on after Shutdown")
	}
	if err := e.Export(context.Background(), body); !errors.Is(err, errShutdown) {
		t.Errorf("export after Shutdown: %v, want %v", err, errShutdown)
	}
}

// Errors name the collector's URL without its password.
func TestExportErrorsNameTheURLWithoutAPassword(t *testing.T) {
	u, _ := url.Parse(closedPort(t))
	u.User = url.UserPassword("me", "s3cret")
	body := testBody()
	err := testExporter(t, u.String(), 300*time.Millisecond, nil).Export(context.Background(), body)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), u.Host) {
		t.Errorf("error %v, want one naming %s without the password", err, u.Host)
	}
}

// A collector's partial success (spans it rejected) is an error.
func TestPartialSuccessIsDecoded(t *testing.T) {
	b := mustMarshal(t, &coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 3, ErrorMessage: "too old"}})
	if n, msg, ok := decodePartialSuccess(b); n != 3 || msg != "too old" || !ok {
		t.Errorf("decoded %d %q %v", n, msg, ok)
	}
	if n, msg, ok := decodePartialSuccess(nil); n != 0 || msg != "" || !ok {
		t.Errorf("empty response decoded %d %q %v", n, msg, ok)
	}
}

func TestMain(m *testing.M) {
	// The exporter's tests set their environment through getenv: the
	// OTEL_* variables of whoever runs them must not reach FromEnv's.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			os.Unsetenv(k)
		}
	}
	os.Exit(m.Run())
}
