package mux

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/catalogmem"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/tracing"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The agent's trace context, as an agent that traces sends it.
const (
	agentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	agentSpan  = "00f067aa0ba902b7"
	agentTP    = "00-" + agentTrace + "-" + agentSpan + "-01"
	agentTS    = "agent=t61rcWkgMzE"
)

// startTracer is a tracer exporting to an OTLP receiver of the test's,
// configured as mcp-mux's would be: by the environment.
func startTracer(t testing.TB) (*tracing.Tracer, *testkit.OTLPReceiver) {
	t.Helper()
	rcv := testkit.StartOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20") // ms: spans arrive while the test waits
	tr, err := tracing.FromEnv(os.Getenv, "test", testLogger(t))
	if err != nil || tr == nil {
		t.Fatalf("FromEnv: %v %v", tr, err)
	}
	t.Cleanup(func() { tr.Shutdown(time.Second) })
	return tr, rcv
}

// startTracedMux is startMux with tr tracing its requests (nil: none).
func startTracedMux(t testing.TB, tr *tracing.Tracer, specs ...config.Backend) *Mux {
	t.Helper()
	m := New(testConfig(specs...), testLogger(t), "test")
	m.catalogs = catalogmem.Open(filepath.Join(t.TempDir(), "catalogs"))
	m.SetTracer(tr)
	m.Start()
	t.Cleanup(m.Close)
	return m
}

// agentOf is a session of an agent of era (handshake or current) at m's
// door ("stdio" or "http"), its first list done: its calls take the
// pass-through (stdio) or the fast path (HTTP) from then on.
func agentOf(t *testing.T, m *Mux, door, era string) *mcp.ClientSession {
	t.Helper()
	if door == "http" {
		version := "2025-11-25"
		if era == "current" {
			version = modernEra
		}
		cs, log := httpAgentAt(t, m, nil, version)
		t.Cleanup(func() { fastOnly(t, log) })
		return cs
	}
	version := "2025-11-25"
	if era == "current" {
		version = ""
	}
	cs := connectAt(t, m, nil, version)
	toolNames(t, cs)
	return cs
}

// receivedMeta calls tool (the fixture's "meta") with meta and returns
// the _meta the backend received.
func receivedMeta(t *testing.T, cs *mcp.ClientSession, tool string, meta mcp.Meta) map[string]any {
	t.Helper()
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: tool, Meta: meta})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %+v", tool, err, res)
	}
	var got struct {
		Meta map[string]any `json:"meta"`
	}
	if err := json.Unmarshal([]byte(text(t, res.Content)), &got); err != nil {
		t.Fatal(err)
	}
	return got.Meta
}

// traceparentIDs splits a traceparent into its trace id and parent span
// id, failing t if it is not one.
func traceparentIDs(t *testing.T, tp any) (trace, span string) {
	t.Helper()
	s, _ := tp.(string)
	f := strings.Split(s, "-")
	if len(f) != 4 || f[0] != "00" || len(f[1]) != 32 || len(f[2]) != 16 || len(f[3]) != 2 {
		t.Fatalf("traceparent %q is not a W3C traceparent", tp)
	}
	return f[1], f[2]
}

// exported waits for the span spanID to reach rcv.
func exported(t *testing.T, rcv *testkit.OTLPReceiver, spanID string) testkit.Span {
	t.Helper()
	var s testkit.Span
	testkit.Eventually(t, 10*time.Second, "span "+spanID+" exported", func() bool {
		var ok bool
		s, ok = rcv.SpanWithID(spanID)
		return ok
	})
	return s
}

// exportedNamed waits for a span named name, a child of the agent's span.
func exportedNamed(t *testing.T, rcv *testkit.OTLPReceiver, name string) testkit.Span {
	t.Helper()
	var found testkit.Span
	testkit.Eventually(t, 10*time.Second, "span "+name+" exported", func() bool {
		for _, s := range rcv.Spans() {
			if s.Name == name && s.ParentSpanID == agentSpan {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

func wantAttrs(t *testing.T, s testkit.Span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if s.Attrs[k] != v {
			t.Errorf("span %q: %s = %q, want %q (attributes %v)", s.Name, k, s.Attrs[k], v, s.Attrs)
		}
	}
}

// With tracing on, a call reaches the backend with the agent's trace id
// and a parent span of mux's own, exported as a child of the agent's
// span, on every route: the stdio pass-through and the HTTP fast path,
// of both eras, and the go-sdk's typed path (prompts/get). A call with
// no trace context starts a trace, which the backend is given too.
func TestTracedCallReachesTheBackendAsAChildOfMuxsSpan(t *testing.T) {
	tr, rcv := startTracer(t)
	m := startTracedMux(t, tr, fixture(t, "fx", "-mrtr"))
	for _, door := range []string{"stdio", "http"} {
		for _, era := range []string{"handshake", "current"} {
			t.Run(door+"/"+era, func(t *testing.T) {
				cs := agentOf(t, m, door, era)
				got := receivedMeta(t, cs, "fx__meta", mcp.Meta{"traceparent": agentTP, "tracestate": agentTS, "agent/own": "kept"})
				trace, parent := traceparentIDs(t, got["traceparent"])
				if trace != agentTrace || parent == agentSpan {
					t.Fatalf("backend's traceparent %v: want trace %s and a parent of mux's, not the agent's span %s", got["traceparent"], agentTrace, agentSpan)
				}
				if got["tracestate"] != agentTS || got["agent/own"] != "kept" {
					t.Errorf("backend's _meta %v: want the agent's tracestate and other keys passed on", got)
				}
				s := exported(t, rcv, parent)
				if s.TraceID != agentTrace || s.ParentSpanID != agentSpan || s.Kind != "SPAN_KIND_CLIENT" || s.Name != "tools/call fx__meta" || s.Error {
					t.Errorf("mux's span: %+v, want a client span tools/call fx__meta, child of %s in trace %s, not an error", s, agentSpan, agentTrace)
				}
				wantAttrs(t, s, map[string]string{"mcp.method.name": "tools/call", "mcp_mux.backend": "fx", "gen_ai.tool.name": "fx__meta"})

				// No trace context of the agent's: a new trace, mux's
				// span its root, named to the backend.
				got = receivedMeta(t, cs, "fx__meta", nil)
				trace, parent = traceparentIDs(t, got["traceparent"])
				if trace == agentTrace {
					t.Errorf("a call without a traceparent went on in the agent's earlier trace")
				}
				if s := exported(t, rcv, parent); s.TraceID != trace || s.ParentSpanID != "" {
					t.Errorf("mux's span of an untraced call: %+v, want the root of trace %s", s, trace)
				}
			})
		}
	}
	t.Run("go-sdk path", func(t *testing.T) {
		cs := connect(t, m, nil)
		if _, err := cs.GetPrompt(testkit.CtxT(t), &mcp.GetPromptParams{Name: "fx__greet", Arguments: map[string]string{"name": "Ann"}, Meta: mcp.Meta{"traceparent": agentTP}}); err != nil {
			t.Fatal(err)
		}
		s := exportedNamed(t, rcv, "prompts/get fx__greet")
		wantAttrs(t, s, map[string]string{"mcp.method.name": "prompts/get", "mcp_mux.backend": "fx", "gen_ai.prompt.name": "fx__greet"})
		if _, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: "fixture://fx/res/1", Meta: mcp.Meta{"traceparent": agentTP}}); err != nil {
			t.Fatal(err)
		}
		s = exportedNamed(t, rcv, "resources/read")
		wantAttrs(t, s, map[string]string{"mcp.method.name": "resources/read", "mcp.resource.uri": "fixture://fx/res/1"})
	})
}

// A backend's JSON-RPC error and a tool's own error (isError) mark mux's
// span as an error; the agent gets the same answers as without tracing.
func TestTracedErrorsMarkTheSpan(t *testing.T) {
	tr, rcv := startTracer(t)
	m := startTracedMux(t, tr, fixture(t, "fx"))
	cs := agentOf(t, m, "stdio", "handshake")
	_, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__fail", Arguments: map[string]any{"code": -32050, "message": "boom"}, Meta: mcp.Meta{"traceparent": agentTP}})
	if je := rpcCode(t, err); je.Code != -32050 {
		t.Fatalf("fx__fail: %v, want the backend's -32050", err)
	}
	s := exportedNamed(t, rcv, "tools/call fx__fail")
	if !s.Error || !strings.Contains(s.StatusMessage, "boom") {
		t.Errorf("span of a call the backend failed: %+v, want status error with its message", s)
	}
	wantAttrs(t, s, map[string]string{"rpc.response.status_code": "-32050", "error.type": "-32050"})

	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__fail", Arguments: map[string]any{"tool_error": true, "message": "nope"}, Meta: mcp.Meta{"traceparent": "00-" + agentTrace + "-1111111111111111-01"}})
	if err != nil || !res.IsError {
		t.Fatalf("fx__fail with tool_error: %v %+v, want a tool error", err, res)
	}
	var toolErr testkit.Span
	testkit.Eventually(t, 10*time.Second, "the tool error's span exported", func() bool {
		for _, s := range rcv.Spans() {
			if s.ParentSpanID == "1111111111111111" {
				toolErr = s
				return true
			}
		}
		return false
	})
	if !toolErr.Error || toolErr.Attrs["error.type"] != "tool_error" {
		t.Errorf("span of a tool error: %+v, want status error, error.type tool_error", toolErr)
	}
}

// With tracing off, the agent's trace context reaches the backend as the
// agent sent it, on every route and in both eras: mux is not a hop of
// the trace then, and must not break it.
func TestTracingOffPassesTheAgentsTraceContextUnchanged(t *testing.T) {
	m := startTracedMux(t, nil, fixture(t, "fx", "-mrtr"))
	for _, door := range []string{"stdio", "http"} {
		for _, era := range []string{"handshake", "current"} {
			t.Run(door+"/"+era, func(t *testing.T) {
				cs := agentOf(t, m, door, era)
				got := receivedMeta(t, cs, "fx__meta", mcp.Meta{"traceparent": agentTP, "tracestate": agentTS})
				if got["traceparent"] != agentTP || got["tracestate"] != agentTS {
					t.Errorf("backend's _meta %v: want the agent's traceparent %s and tracestate %s as they were", got, agentTP, agentTS)
				}
				if got := receivedMeta(t, cs, "fx__meta", nil); got["traceparent"] != nil {
					t.Errorf("backend's _meta %v: mux added a traceparent with tracing off", got)
				}
			})
		}
	}
}

// benchMux is the mux a benchmark measures: with MCP_MUX_BENCH_TRACING
// set, tracing every call to an OTLP receiver of the benchmark's own
// (run the benchmark with and without it, and compare: benchstat).
func benchMux(b *testing.B, specs ...config.Backend) *Mux {
	b.Helper()
	if os.Getenv("MCP_MUX_BENCH_TRACING") == "" {
		return startMux(b, specs...)
	}
	tr, _ := startTracer(b)
	return startTracedMux(b, tr, specs...)
}
