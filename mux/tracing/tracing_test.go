package tracing

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestEnabledOnlyWithAnEndpointAndNotTurnedOff(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := Enabled(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

// Tracing off: no tracer, nothing started.
func TestFromEnvWithoutAnEndpointIsNil(t *testing.T) {
	var logs syncBuffer
	tr, err := FromEnv(envOf(map[string]string{"OTEL_SERVICE_NAME": "x"}), "t", quietLogger(&logs))
	if tr != nil || err != nil || logs.String() != "" {
		t.Errorf("FromEnv = %v, %v (log %q); want nil, nil and nothing said", tr, err, logs.String())
	}
	tr.Shutdown(time.Second) // a nil tracer's is a no-op
}

// memExporter keeps what a tracer exports.
type memExporter struct {
	mu      sync.Mutex
	batches [][]spanData
}

func (m *memExporter) export(_ context.Context, spans []*spanData) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := make([]spanData, len(spans))
	for i, s := range spans {
		b[i] = *s
	}
	m.batches = append(m.batches, b)
	return nil
}

func (m *memExporter) spans() []spanData {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []spanData
	for _, b := range m.batches {
		all = append(all, b...)
	}
	return all
}

// testConfig is the configuration of an empty environment.
func testConfig(t *testing.T) config { return configFromEnv(envOf(nil), noWarn(t)) }

// testTracer is a tracer of cfg exporting to memory; the spans are there
// once it is shut down (or its schedule delay is up).
func testTracer(t *testing.T, cfg config) (*Tracer, *memExporter) {
	m := &memExporter{}
	tr := newTracer(cfg, m.export, func(err error) { t.Errorf("export failed: %v", err) }, nil)
	t.Cleanup(func() { tr.Shutdown(time.Second) })
	return tr, m
}

// ended is the spans tr exported, all of them: it is shut down.
func ended(tr *Tracer, m *memExporter) []spanData {
	tr.Shutdown(5 * time.Second)
	return m.spans()
}

func attrs(d spanData) map[string]string {
	a := map[string]string{}
	for _, kv := range d.attrs {
		a[kv.key] = kv.value
	}
	return a
}

// The backend's _meta is the agent's, but for the trace context: a
// traceparent naming mux's span in the agent's trace, the tracestate
// passed on; the agent's own map is left as it was.
func TestStartContinuesTheAgentsTrace(t *testing.T) {
	tr, m := testTracer(t, testConfig(t))
	agent := map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "a=1, b=2", "k": "v"}
	span, meta := tr.Start(Request{Method: "tools/call", Backend: "fx", Target: "fx__echo"}, agent)
	span.End(nil, nil)
	if agent["traceparent"] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" || agent["tracestate"] != "a=1, b=2" {
		t.Errorf("the agent's _meta was changed: %v", agent)
	}
	s := ended(tr, m)[0]
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + hex.EncodeToString(s.span[:]) + "-01"
	if meta["traceparent"] != want || span.Traceparent != want || meta["tracestate"] != "a=1,b=2" || span.Tracestate != "a=1,b=2" || meta["k"] != "v" {
		t.Errorf("backend's _meta %v (span's %q %q), want traceparent %s, tracestate a=1,b=2, k", meta, span.Traceparent, span.Tracestate, want)
	}
	if hex.EncodeToString(s.parent[:]) != "00f067aa0ba902b7" || hex.EncodeToString(s.trace[:]) != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		s.name != "tools/call fx__echo" || s.traceState != "a=1,b=2" || s.flags != flagSampled {
		t.Errorf("span %q in %x, parent %x, state %q, flags %02x: want tools/call fx__echo, child of the agent's span, its state, sampled", s.name, s.trace, s.parent, s.traceState, s.flags)
	}
	if !s.end.After(s.start) && !s.end.Equal(s.start) {
		t.Errorf("span ends %v before it starts %v", s.end, s.start)
	}
}

// An agent's traceparent that is not valid starts a new trace, and its
// tracestate, which belongs to that trace, is not passed on. No span is
// exported before it ends.
func TestStartWithAnInvalidTraceparentStartsANewTrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		cfg.scheduleDelay = time.Millisecond
		tr, m := testTracer(t, cfg)
		span, meta := tr.Start(Request{Method: "resources/read", Target: "x://y"}, map[string]any{"traceparent": "garbage", "tracestate": "a=1"})
		time.Sleep(50 * time.Millisecond) // fifty schedule delays
		synctest.Wait()
		if s := m.spans(); len(s) != 0 {
			t.Fatalf("a span was exported before End: %v", s)
		}
		tp, _ := meta["traceparent"].(string)
		if p, ok := parseTraceparent(tp); !ok || !strings.HasPrefix(tp, "00-") || p.trace == (traceID{0x4b}) || p.flags != flagSampled {
			t.Errorf("traceparent %q, want a new one, sampled", tp)
		}
		if _, ok := meta["tracestate"]; ok || span.Tracestate != "" {
			t.Errorf("the agent's tracestate went on with a new trace: %v", meta)
		}
		span.End(nil, nil)
		if s := ended(tr, m); len(s) != 1 || s[0].parent != (spanID{}) || s[0].traceState != "" {
			t.Errorf("spans %+v, want one root span", s)
		}
	})
}

// An invalid tracestate is dropped, the traceparent kept; one that is not
// a string is none.
func TestStartDropsAnInvalidTracestate(t *testing.T) {
	tr, _ := testTracer(t, testConfig(t))
	for _, ts := range []any{"A=1", 42} {
		span, meta := tr.Start(Request{Method: "ping"}, map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": ts})
		if _, ok := meta["tracestate"]; ok || !strings.HasPrefix(span.Traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-") {
			t.Errorf("tracestate %v: _meta %v, want the trace without the tracestate", ts, meta)
		}
	}
}

// The span's name, kind (client, the encoder's) and attributes, by method.
func TestStartNamesAndAttributes(t *testing.T) {
	for _, c := range []struct {
		req   Request
		name  string
		attrs []string
	}{
		{Request{Method: "tools/call", Backend: "fx", Target: "fx__echo", Version: "2025-11-25"}, "tools/call fx__echo",
			[]string{"mcp.method.name=tools/call", "mcp_mux.backend=fx", "mcp.protocol.version=2025-11-25", "gen_ai.tool.name=fx__echo", "gen_ai.operation.name=execute_tool"}},
		{Request{Method: "prompts/get", Backend: "fx", Target: "greet"}, "prompts/get greet",
			[]string{"mcp.method.name=prompts/get", "mcp_mux.backend=fx", "gen_ai.prompt.name=greet"}},
		{Request{Method: "resources/read", Backend: "fx", Target: "file:///a"}, "resources/read",
			[]string{"mcp.method.name=resources/read", "mcp_mux.backend=fx", "mcp.resource.uri=file:///a"}},
		{Request{Method: "resources/subscribe", Backend: "fx"}, "resources/subscribe",
			[]string{"mcp.method.name=resources/subscribe", "mcp_mux.backend=fx"}},
		{Request{Method: "completion/complete", Backend: "fx", Target: "ignored"}, "completion/complete",
			[]string{"mcp.method.name=completion/complete", "mcp_mux.backend=fx"}},
	} {
		tr, m := testTracer(t, testConfig(t))
		span, _ := tr.Start(c.req, nil)
		span.End(nil, nil)
		s := ended(tr, m)[0]
		var got []string
		for _, kv := range s.attrs {
			got = append(got, kv.key+"="+kv.value)
		}
		if s.name != c.name || !slices.Equal(got, c.attrs) || s.statusError {
			t.Errorf("%+v: span %q %v (error %v), want %q %v", c.req, s.name, got, s.statusError, c.name, c.attrs)
		}
	}
}

func TestEndMarksErrorsAndToolErrors(t *testing.T) {
	for _, c := range []struct {
		err     error
		result  any
		isError bool
		errTyp  string
		code    string
		message string
	}{
		{nil, []byte(`{"content":[]}`), false, "", "", ""},
		{nil, jsonRaw(`{"content":[],"isError":false}`), false, "", "", ""},
		{nil, jsonRaw(`{"content":[],"isError":true}`), true, "tool_error", "", "the tool's result is an error (isError)"},
		{&jsonrpc.Error{Code: -32602, Message: "bad"}, nil, true, "-32602", "-32602", "bad"},
		{errors.New("plain"), nil, true, "-32603", "-32603", "plain"},
	} {
		tr, m := testTracer(t, testConfig(t))
		span, _ := tr.Start(Request{Method: "tools/call"}, nil)
		span.End(c.err, c.result)
		span.End(errors.New("again"), nil) // a span ends once
		spans := ended(tr, m)
		if len(spans) != 1 {
			t.Fatalf("%d spans exported, want 1", len(spans))
		}
		s, a := spans[0], attrs(spans[0])
		if s.statusError != c.isError || a["error.type"] != c.errTyp || a["rpc.response.status_code"] != c.code || s.statusMessage != c.message {
			t.Errorf("End(%v, %s): error %v %q, error.type %q, status code %q; want %v %q %q %q", c.err, c.result, s.statusError, s.statusMessage, a["error.type"], a["rpc.response.status_code"], c.isError, c.message, c.errTyp, c.code)
		}
	}
}

// Each sampler as OTEL_TRACES_SAMPLER names it, with an agent's span
// sampled, not sampled, or none: whether mux's span is exported, and the
// flags the backend gets (the agent's random flag goes on).
func TestSamplersDecideAndPropagate(t *testing.T) {
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736" // its lower 8 bytes are 0.64 of their range
	parents := map[string]string{
		"sampled":     "00-" + tid + "-00f067aa0ba902b7-01",
		"not sampled": "00-" + tid + "-00f067aa0ba902b7-00",
		"random":      "00-" + tid + "-00f067aa0ba902b7-02", // not sampled
	}
	for _, c := range []struct {
		sampler, arg string
		want         map[string]bool // by parent; "none": a new trace
	}{
		{"always_on", "", map[string]bool{"sampled": true, "not sampled": true, "random": true, "none": true}},
		{"always_off", "", map[string]bool{"sampled": false, "not sampled": false, "random": false, "none": false}},
		{"parentbased_always_on", "", map[string]bool{"sampled": true, "not sampled": false, "random": false, "none": true}},
		{"parentbased_always_off", "", map[string]bool{"sampled": true, "not sampled": false, "random": false, "none": false}},
		{"traceidratio", "0.75", map[string]bool{"sampled": true, "not sampled": true, "random": true}}, // by the agent's trace id
		{"traceidratio", "0.5", map[string]bool{"sampled": false, "not sampled": false, "random": false}},
		{"parentbased_traceidratio", "0", map[string]bool{"sampled": true, "not sampled": false, "random": false, "none": false}},
	} {
		cfg := testConfig(t)
		cfg.sampler = samplerFromEnv(envOf(map[string]string{"OTEL_TRACES_SAMPLER": c.sampler, "OTEL_TRACES_SAMPLER_ARG": c.arg}), noWarn(t))
		for parent, want := range c.want {
			tr, m := testTracer(t, cfg)
			meta := map[string]any{}
			if parent != "none" {
				meta["traceparent"] = parents[parent]
			}
			span, out := tr.Start(Request{Method: "ping"}, meta)
			span.End(nil, nil)
			exported := len(ended(tr, m)) == 1
			p, ok := parseTraceparent(out["traceparent"].(string))
			wantFlags := byte(0)
			if want {
				wantFlags |= flagSampled
			}
			if parent == "random" {
				wantFlags |= flagRandom
			}
			if !ok || exported != want || p.flags != wantFlags {
				t.Errorf("%s %s, parent %s: exported %v, traceparent %s; want exported %v, flags %02x", c.sampler, c.arg, parent, exported, out["traceparent"], want, wantFlags)
			}
		}
	}
}

// traceidratio decides as the SDK's TraceIDRatioBased: each row's
// decisions for ids were computed with it (sdk/trace v1.47.0), so that
// mcp-mux samples the traces other services sampling the same ratio do.
func TestTraceIDRatioAgreesWithTheSDK(t *testing.T) {
	ids := []string{
		"4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c", "00000000000000000000000000000001",
		"ffffffffffffffff7fffffffffffffff", "ffffffffffffffff8000000000000000", "0000000000000000ffffffffffffffff",
		"00000000000000004000000000000000", "00000000000000003fffffffffffffff", "12345678123456780000000000000002",
	}
	for _, c := range []struct {
		ratio float64
		want  string // a decision per id, 1 sampled
	}{
		{0.5, "001100111"}, {0.25, "001000011"}, {0.1, "001000001"}, {1e-9, "001000001"},
		{0.999999, "111110111"}, {0, "000000000"}, {1, "111111111"}, {0.75, "111110111"},
	} {
		s := ratioSampler(c.ratio)
		var got strings.Builder
		for _, id := range ids {
			var tid traceID
			hex.Decode(tid[:], []byte(id))
			if s.sampled(tid, parent{}, false) {
				got.WriteByte('1')
			} else {
				got.WriteByte('0')
			}
		}
		if got.String() != c.want {
			t.Errorf("ratio %v: decisions %s, the SDK's %s", c.ratio, got.String(), c.want)
		}
	}
}

// An export's first failure is a warning, the rest debug; a password in
// the collector's URL is not shown.
func TestExportErrorsAreWarnedOnceWithoutAPassword(t *testing.T) {
	var logs syncBuffer
	failed := exportErrors(quietLogger(&logs))
	failed(errors.New(`exporting spans to https://me:s3cret@collector:4318/v1/traces: 401`))
	failed(errors.New("again"))
	out := logs.String()
	if strings.Contains(out, "s3cret") || !strings.Contains(out, "https://***@collector") {
		t.Errorf("log shows the password, or no URL:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "WARN") || !strings.HasPrefix(lines[1], "DEBU") {
		t.Errorf("log:\n%s\nwant a warning, then debug", out)
	}
}

// Export errors go to the tracer's hook and logger, never to stdout.
func TestFromEnvLogsExportErrors(t *testing.T) {
	var logs syncBuffer
	tr, err := FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": closedPort(t), "OTEL_EXPORTER_OTLP_TIMEOUT": "300"}), "t", quietLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	span, _ := tr.Start(Request{Method: "ping"}, nil)
	span.End(nil, nil)
	tr.Shutdown(5 * time.Second)
	if !strings.Contains(logs.String(), "exporting traces failed") {
		t.Errorf("log:\n%s\nwant the export's failure", logs.String())
	}
}

func jsonRaw(s string) json.RawMessage { return json.RawMessage(s) }

// A forwarded request's cost with tracing on: Start and End of a sampled
// span with the agent's trace context.
func BenchmarkStartEnd(b *testing.B) {
	cfg := configFromEnv(envOf(nil), func(string, ...any) {})
	tr := newTracer(cfg, func(context.Context, []*spanData) error { return nil }, nil, nil)
	defer tr.Shutdown(time.Second)
	meta := map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "a=1", "progressToken": 1}
	req := Request{Method: "tools/call", Backend: "fx", Target: "fx__echo", Version: "2025-11-25"}
	b.ReportAllocs()
	for b.Loop() {
		s, _ := tr.Start(req, meta)
		s.End(nil, nil)
	}
}
