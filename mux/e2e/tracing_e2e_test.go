package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Traces through the binary (issue 35): the agent's trace context crosses
// mcp-mux to a stdio and a remote backend, by way of a span of mcp-mux's
// that reaches an OTLP collector, configured by the OTEL_* environment.

const (
	agentTrace = "0af7651916cd43dd8448eb211c80319c"
	agentSpan  = "b7ad6b7169203331"
	agentTP    = "00-" + agentTrace + "-" + agentSpan + "-01"
	agentTS    = "agent=00f067aa0ba902b7"
)

// runMuxEnv is runMux with env added to a copy of the test's environment
// without any OTEL_ variable of its own.
func runMuxEnv(t *testing.T, config string, env ...string) *running {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), "--config", config)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	w := startWireExec(t, cmd)
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(w.out), Writer: nopClose{w.stdin}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, w.stderr)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return &running{wire: w, cs: cs}
}

// callJSON calls tool with args and _meta and decodes its text result.
func callJSON(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, meta mcp.Meta, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %+v", tool, err, res)
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), v); err != nil {
		t.Fatal(err)
	}
}

// muxParent checks that traceparent carries the agent's trace with a
// parent that is not the agent's span, and returns that parent.
func muxParent(t *testing.T, where, traceparent string) string {
	t.Helper()
	f := strings.Split(traceparent, "-")
	if len(f) != 4 || f[1] != agentTrace || len(f[2]) != 16 || f[2] == agentSpan {
		t.Fatalf("%s: traceparent %q, want trace %s with a parent span of mcp-mux's", where, traceparent, agentTrace)
	}
	return f[2]
}

// exportedSpan waits for the span spanID to reach rcv.
func exportedSpan(t *testing.T, rcv *testkit.OTLPReceiver, spanID string) testkit.Span {
	t.Helper()
	var s testkit.Span
	testkit.Eventually(t, 10*time.Second, "span "+spanID+" at the collector", func() bool {
		var ok bool
		s, ok = rcv.SpanWithID(spanID)
		return ok
	})
	return s
}

func TestTracesCrossMcpMuxToStdioAndRemoteBackends(t *testing.T) {
	t.Run("in-process", tracesCross)
	t.Run("shared", func(t *testing.T) {
		sharedDirs(t)
		tracesCross(t)
	})
}

func tracesCross(t *testing.T) {
	rcv := testkit.StartOTLPReceiver(t)
	web := testkit.StartRemoteFixture(t, "-http", "-name", "web", "-mrtr")
	local := strings.Replace(stdioBackend(t, "local"), `"local"]`, `"local", "-mrtr"]`, 1)
	cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\n\n"+local+remoteBackend("web", web, ""))
	r := runMuxEnv(t, cfg, "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=20")
	agent := mcp.Meta{"traceparent": agentTP, "tracestate": agentTS}

	for _, b := range []string{"local", "web"} {
		var got struct {
			Meta map[string]any `json:"meta"`
		}
		callJSON(t, r.cs, b+"__meta", nil, agent, &got)
		tp, _ := got.Meta["traceparent"].(string)
		parent := muxParent(t, b+"'s _meta", tp)
		if got.Meta["tracestate"] != agentTS {
			t.Errorf("%s's _meta tracestate %v, want the agent's %q", b, got.Meta["tracestate"], agentTS)
		}
		s := exportedSpan(t, rcv, parent)
		if s.TraceID != agentTrace || s.ParentSpanID != agentSpan || s.Name != "tools/call "+b+"__meta" ||
			s.Attrs["mcp_mux.backend"] != b || s.Attrs["mcp.method.name"] != "tools/call" {
			t.Errorf("mcp-mux's span for %s: %+v, want tools/call %s__meta, child of the agent's span %s, backend %s", b, s, b, agentSpan, b)
		}
	}

	// The remote backend's POST carries the same trace context as headers.
	var headers map[string]string
	callJSON(t, r.cs, "web__headers", map[string]any{"names": []string{"traceparent", "tracestate"}}, agent, &headers)
	parent := muxParent(t, "the remote POST's header", headers["traceparent"])
	if headers["tracestate"] != agentTS {
		t.Errorf("the remote POST's tracestate header %q, want the agent's %q", headers["tracestate"], agentTS)
	}
	if s := exportedSpan(t, rcv, parent); s.ParentSpanID != agentSpan || s.Name != "tools/call web__headers" {
		t.Errorf("the span the remote POST's traceparent names: %+v, want tools/call web__headers, child of %s", s, agentSpan)
	}
	if services := rcv.Services(); !slices.Contains(services, "mcp-mux") {
		t.Errorf("service.name of the exports: %v, want mcp-mux", services)
	}
}

// Sessions of the shared mcp-mux whose OTEL_ environments differ each
// export to their own collector, never to another's.
func TestTracesOfSharedSessionsGoToTheirOwnCollectors(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteRawConfig(t, strings.Replace(stdioBackend(t, "local"), `"local"]`, `"local", "-mrtr"]`, 1))
	rcvs := []*testkit.OTLPReceiver{testkit.StartOTLPReceiver(t), testkit.StartOTLPReceiver(t)}
	var parents []string
	for _, rcv := range rcvs {
		r := runMuxEnv(t, cfg, "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=20")
		var got struct {
			Meta map[string]any `json:"meta"`
		}
		callJSON(t, r.cs, "local__meta", nil, mcp.Meta{"traceparent": agentTP}, &got)
		tp, _ := got.Meta["traceparent"].(string)
		parents = append(parents, muxParent(t, "local's _meta", tp))
	}
	if n := len(sharedProcs(t)); n != 1 {
		t.Errorf("%d shared processes, want 1", n)
	}
	for i, rcv := range rcvs {
		exportedSpan(t, rcv, parents[i])
		if _, ok := rcvs[1-i].SpanWithID(parents[i]); ok {
			t.Errorf("session %d's span reached the other session's collector", i)
		}
	}
}

// silentCollector is an address that takes connections and never
// answers: a collector that hangs (the kernel accepts into the backlog).
func silentCollector(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return "http://" + ln.Addr().String()
}

// closedPort is an address nothing listens on: a collector that is down.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// A collector that is down, or hangs, never fails or slows a request, and
// mcp-mux still exits promptly when the agent goes: the spans it could
// not send are given up (traceFlushTimeout), where the exporter would
// wait seconds for them.
func TestUnreachableCollectorNeitherSlowsRequestsNorExit(t *testing.T) {
	for _, c := range []struct {
		name     string
		endpoint func(*testing.T) string
	}{{"closed port", closedPort}, {"silent", silentCollector}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"})
			r := runMuxEnv(t, cfg, "OTEL_EXPORTER_OTLP_ENDPOINT="+c.endpoint(t), "OTEL_BSP_SCHEDULE_DELAY=10")
			var slowest time.Duration
			for i := range 30 {
				start := time.Now()
				got := callText(t, r.cs, "notes__echo", map[string]any{"i": i})
				slowest = max(slowest, time.Since(start))
				if !strings.Contains(got, `"i":`) {
					t.Fatalf("call %d answered %q", i, got)
				}
			}
			// A bound, not a measurement: on a loaded machine a call takes
			// milliseconds; one that waited for the collector would take
			// its timeout (seconds).
			if slowest > 500*time.Millisecond {
				t.Errorf("slowest call took %v with the collector unreachable, want well under a second", slowest)
			}
			start := time.Now()
			r.stdin.Close()
			select {
			case <-r.exited:
			case <-time.After(10 * time.Second):
				t.Fatalf("mcp-mux still running 10 s after stdin EOF\nstderr:\n%s", r.stderr)
			}
			t.Logf("slowest call %v; exited %v after stdin EOF", slowest, time.Since(start))
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v to exit with the collector unreachable, want well under a second", d)
			}
			if c.name == "closed port" && !strings.Contains(r.stderr.String(), "exporting traces failed") {
				t.Errorf("stderr does not say the export failed:\n%s", r.stderr)
			}
		})
	}
}

// A protocol mcp-mux does not speak (OTLP over gRPC here) turns tracing
// off with a warning saying why, rather than send the collector what it
// cannot read; serving goes on, the agent's trace context passing
// through unchanged as with tracing off.
func TestUnsupportedOTLPProtocolTurnsTracingOffWithAWarning(t *testing.T) {
	rcv := testkit.StartOTLPReceiver(t)
	local := strings.Replace(stdioBackend(t, "local"), `"local"]`, `"local", "-mrtr"]`, 1) // -mrtr: the meta tool
	r := runMuxEnv(t, testkit.WriteRawConfig(t, local), "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_BSP_SCHEDULE_DELAY=10")
	var got struct {
		Meta map[string]any `json:"meta"`
	}
	callJSON(t, r.cs, "local__meta", nil, mcp.Meta{"traceparent": agentTP, "tracestate": agentTS}, &got)
	if got.Meta["traceparent"] != agentTP || got.Meta["tracestate"] != agentTS {
		t.Errorf("the backend's _meta %v, want the agent's trace context unchanged", got.Meta)
	}
	r.stdin.Close()
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("mcp-mux still running 10 s after stdin EOF\nstderr:\n%s", r.stderr)
	}
	if s := r.stderr.String(); !strings.Contains(s, "tracing is off") || !strings.Contains(s, `OTEL_EXPORTER_OTLP_PROTOCOL is \"grpc\"`) || strings.Contains(s, "tracing on") {
		t.Errorf("stderr does not say tracing is off for the protocol:\n%s", s)
	}
	if n := rcv.Attempts(); n != 0 {
		t.Errorf("%d requests reached the collector, want none", n)
	}
}
