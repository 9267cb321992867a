package mux

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The cost of the mux is measured against a direct connection to the same
// fixture backend, in the same run: compare the two ns/op (benchstat, or
// the ratio printed by BenchmarkToolCall).

func directSession(b *testing.B, version string) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(),
		&mcp.CommandTransport{Command: exec.Command(testkit.FixtureBin(b), "-name", "notes")}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func BenchmarkToolCall(b *testing.B) {
	args := map[string]any{"hello": "world"}
	run := func(b *testing.B, cs *mcp.ClientSession, name string) time.Duration {
		ctx := context.Background()
		cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}) // warm up
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	// Both eras: "" is the current one (server/discover, then the version
	// in every request's _meta).
	for _, version := range []string{"2025-11-25", ""} {
		era := "handshake era"
		if version == "" {
			era = "current era"
		}
		var direct, muxed time.Duration
		b.Run("direct, "+era, func(b *testing.B) { direct = run(b, directSession(b, version), "echo") })
		b.Run("mux, "+era, func(b *testing.B) {
			m := benchMux(b, fixture(b, "notes")) // traced with MCP_MUX_BENCH_TRACING
			cs := connectAt(b, m, nil, version)
			toolNames(b, cs) // as agents do: calls pass through as bytes from then on
			muxed = run(b, cs, "notes__echo")
		})
		if direct > 0 {
			b.Logf("tools/call through the mux, %s: %.2f× a direct connection (%v vs %v per call)", era, float64(muxed)/float64(direct), muxed, direct)
		}
	}
}

// BenchmarkConcurrentStart: ten backends that each take 200 ms to start,
// from mux start to a complete first tools/list.
func BenchmarkConcurrentStart(b *testing.B) {
	for i := 0; i < b.N; i++ {
		var specs []config.Backend
		for j := range 10 {
			specs = append(specs, fixture(b, fmt.Sprintf("slow%d", j), "-start-delay", "200ms"))
		}
		m := New(testConfig(specs...), testLogger(b), "bench")
		m.Start()
		st, ct := mcp.NewInMemoryTransports()
		m.Connect(context.Background(), st)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cs.Close()
		m.Close()
		b.StartTimer()
	}
}

// BenchmarkHTTPToolCall: one tools/call at a time through the HTTP door,
// as bytes on the wire (what the go-sdk client sends, without its own
// cost, so that allocs/op is mostly mux's): of the current era (no
// session, the client's _meta on every request, as the go-sdk client with
// default options sends it) and of the handshake era (in a session).
func BenchmarkHTTPToolCall(b *testing.B) {
	m := benchMux(b, fixture(b, "notes")) // traced with MCP_MUX_BENCH_TRACING
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ServeHTTP(ctx, ln, door.HTTPOptions{}) }()
	b.Cleanup(func() { cancel(); <-done })
	url := "http://" + ln.Addr().String() + door.HTTPPath
	cs := connectAt(b, m, nil, "2025-11-25")
	toolNames(b, cs) // the first list is over: calls take the fast path
	client := &http.Client{Transport: &http.Transport{}}
	post := func(b *testing.B, body string, headers ...string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(data, []byte(`"result"`)) {
			b.Fatalf("%s: %s", resp.Status, data)
		}
	}
	b.Run("current era", func(b *testing.B) {
		body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"notes__echo","arguments":{"hello":"world"}}}`
		headers := []string{"Mcp-Method", "tools/call", "Mcp-Name", "notes__echo", "MCP-Protocol-Version", modernEra}
		post(b, body, headers...)
		cpuLoop(b, func() { post(b, body, headers...) })
	})
	b.Run("handshake era", func(b *testing.B) {
		resp, err := rawPost(context.Background(), url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"bench","version":"0"}}}`)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		headers := []string{"Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"}
		resp, err = rawPost(context.Background(), url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notes__echo","arguments":{"hello":"world"}}}`
		post(b, body, headers...)
		cpuLoop(b, func() { post(b, body, headers...) })
	})
}

// BenchmarkHTTPRoute: mux's own route for one current-era tools/call of
// a handshake-era stdio backend, the handler called directly (no HTTP
// client, no net/http server): cpu-ns/op is what mux adds to the HTTP door
// per call, its pipe writes and reads included, without the client's and
// net/http's CPU that BenchmarkHTTPToolCall's has in it. Run it with
// -cpu 1, as mcp-mux serves.
func BenchmarkHTTPRoute(b *testing.B) {
	m := benchMux(b, fixture(b, "notes"))
	cs := connectAt(b, m, nil, "2025-11-25")
	toolNames(b, cs) // the first list is over: calls take the fast path
	h := m.HTTPHandler(door.HTTPOptions{})
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"notes__echo","arguments":{"hello":"world"}}}`
	header := http.Header{}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Method": "tools/call", "Mcp-Name": "notes__echo", "MCP-Protocol-Version": modernEra} {
		header.Set(k, v)
	}
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}
	ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, net.Addr(local))
	w := &routeRecorder{header: http.Header{}}
	call := func() {
		r := (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: door.HTTPPath}, Host: "127.0.0.1:9", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: header.Clone(), Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}).WithContext(ctx)
		w.reset()
		h.ServeHTTP(w, r)
		if w.status != http.StatusOK || !bytes.Contains(w.body.Bytes(), []byte(`"result"`)) {
			b.Fatalf("%d: %s", w.status, w.body.Bytes())
		}
	}
	call()
	cpuLoop(b, call)
}

// cpuLoop runs op b.N times and reports the process's CPU per op too
// (mux's, and the client's when it is in the process; not the backend's):
// what a loaded machine's ns/op does not say.
func cpuLoop(b *testing.B, op func()) {
	b.ReportAllocs()
	cpu := processCPU()
	n := 0
	for b.Loop() {
		op()
		n++
	}
	if cpu > 0 {
		b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(n), "cpu-ns/op")
	}
}

// routeRecorder is the least http.ResponseWriter for BenchmarkHTTPRoute.
type routeRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *routeRecorder) reset() {
	clear(w.header)
	w.status = 0
	w.body.Reset()
}
func (w *routeRecorder) Header() http.Header { return w.header }
func (w *routeRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *routeRecorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// As net/http's own writer has them, so that http.ResponseController
// costs here what it costs serving.
func (w *routeRecorder) SetWriteDeadline(time.Time) error { return nil }
func (w *routeRecorder) SetReadDeadline(time.Time) error  { return nil }
func (w *routeRecorder) Flush()                           {}
