package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Drain on SIGTERM (README, "Several instances behind a load balancer"):
// readiness fails at once, new sessions and requests get 503 with
// Retry-After, the calls in flight finish, the event streams end with
// what the spec gives a client to reconnect, and then mcp-mux exits.

// teeTransport adds the bearer token and keeps what the event streams
// (GETs, and subscriptions/listen POSTs) brought, as the go-sdk client
// read it.
type teeTransport struct {
	token string

	mu      sync.Mutex
	streams map[string]*testkit.SyncBuffer // "GET" or "listen"
}

func (tt *teeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tt.token)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	key := ""
	switch {
	case r.Method == http.MethodGet:
		key = "GET"
	case r.Header.Get("Mcp-Method") == "subscriptions/listen":
		key = "listen"
	}
	if key != "" && resp.StatusCode == http.StatusOK {
		buf := tt.stream(key)
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, buf), resp.Body}
	}
	return resp, nil
}

// stream is what the first stream of key brought.
func (tt *teeTransport) stream(key string) *testkit.SyncBuffer {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.streams == nil {
		tt.streams = map[string]*testkit.SyncBuffer{}
	}
	if tt.streams[key] == nil {
		tt.streams[key] = &testkit.SyncBuffer{}
	}
	return tt.streams[key]
}

// postAs POSTs a JSON-RPC message to url as the given era's client would,
// returning the response (its body read).
func postAs(t *testing.T, url, token, version, sid, method, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if method != "" {
		req.Header.Set("Mcp-Method", method)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

// readyWatch polls /readyz from before the signal until the listener is
// gone, noting when it last answered 200, when it first answered 503 and
// when it first refused the connection.
type readyWatch struct {
	lastReady, notReady, closed time.Time     // read once done is closed
	ready                       chan struct{} // closed on the first 200
	done                        chan struct{}
}

func watchReady(base string, stop <-chan struct{}) *readyWatch {
	rw := &readyWatch{ready: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	go func() {
		defer close(rw.done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := client.Get(base + "/readyz")
			now := time.Now()
			if err != nil {
				var op *net.OpError
				if errors.As(err, &op) && op.Op == "dial" {
					rw.closed = now
					return
				}
				continue
			}
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				if rw.lastReady.IsZero() {
					close(rw.ready)
				}
				rw.lastReady = now
			case resp.StatusCode == http.StatusServiceUnavailable && rw.notReady.IsZero():
				rw.notReady = now
			}
		}
	}()
	return rw
}

// TestDrainOnSIGTERM: with calls of both eras in flight, a handshake-era
// session's GET stream and a current-era subscriptions/listen open,
// SIGTERM: /readyz answers 503 before the listener closes; a new session
// and new requests get 503 with Retry-After; every call in flight gets its
// result; the GET stream ends with retry:, the listen stream with its
// completion result; mcp-mux exits once the calls are over, well before
// drain_timeout.
func TestDrainOnSIGTERM(t *testing.T) {
	canSignal(t, syscall.SIGTERM)
	const token = "drain-test-token"
	const sleepMS = 2500
	cfg := testkit.WriteConfig(t, "http_token = \"${MUX_TEST_TOKEN}\"\ndrain_timeout = \"20s\"", []string{"f", "-name", "f"})
	m := startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token)
	base := strings.TrimSuffix(m.url, "/mcp")
	testkit.Eventually(t, 10*time.Second, "/readyz to answer 200", func() bool {
		code, _ := probe(t, base+"/readyz")
		return code == http.StatusOK
	})

	oldTee, newTee := &teeTransport{token: token}, &teeTransport{token: token}
	connect := func(tee *teeTransport, version string) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "drain-" + version, Version: "1"}, nil)
		tr := &mcp.StreamableClientTransport{Endpoint: m.url, HTTPClient: &http.Client{Transport: tee}}
		var opts *mcp.ClientSessionOptions
		if version != "" {
			opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
		}
		cs, err := c.Connect(testkit.CtxT(t), tr, opts)
		if err != nil {
			t.Fatalf("connect %s: %v\nstderr:\n%s", version, err, m.stderr)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	old := connect(oldTee, "2025-11-25")
	cur := connect(newTee, "")
	if v := cur.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("negotiated %s, want the current era", v)
	}
	if err := cur.Subscribe(testkit.CtxT(t), &mcp.SubscribeParams{URI: "fixture://f/res/1"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the listen stream's acknowledgement and the GET stream", func() bool {
		return strings.Contains(newTee.stream("listen").String(), "notifications/subscriptions/acknowledged") &&
			oldTee.stream("GET") != nil && strings.Contains(m.stderr.String(), "session started")
	})

	// Calls in flight: two of each era.
	before := requestsOf(t, old)
	type result struct {
		era string
		res *mcp.CallToolResult
		err error
	}
	results := make(chan result, 4)
	for i, cs := range []*mcp.ClientSession{old, old, cur, cur} {
		era := map[bool]string{true: "handshake", false: "current"}[i < 2]
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "f__sleep", Arguments: map[string]any{"ms": sleepMS}})
			results <- result{era, res, err}
		}()
	}
	polls := 0
	testkit.Eventually(t, 5*time.Second, "the four calls to reach the backend", func() bool {
		polls++ // each poll is a request of its own
		return requestsOf(t, old)-polls >= before+4
	})

	stopWatch := make(chan struct{})
	defer close(stopWatch)
	rw := watchReady(base, stopWatch)
	exited := make(chan time.Time, 1)
	go func() { m.cmd.Wait(); exited <- time.Now() }()
	signalled := time.Now()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 2*time.Second, "/readyz to answer 503 after SIGTERM", func() bool {
		code, body := probe(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "draining")
	})

	// New sessions and new requests: 503, Retry-After.
	for _, tc := range []struct{ what, version, sid, method, body string }{
		{"a new handshake-era session", "", "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`},
		{"a new call of the open session", "2025-11-25", old.ID(), "", `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"f__echo","arguments":{"text":"late"}}}`},
		{"a current-era call", "2026-07-28", "", "tools/call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"f__echo","arguments":{"text":"late"}}}`},
	} {
		resp, body := postAs(t, m.url, token, tc.version, tc.sid, tc.method, tc.body)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s while draining: %d Retry-After %q %q, want 503 with Retry-After", tc.what, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if _, err := old.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "f__echo", Arguments: map[string]any{"text": "late"}}); err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Errorf("the go-sdk client's new call while draining: %v, want Service Unavailable", err)
	}

	// Every call in flight gets its result.
	for range 4 {
		select {
		case r := <-results:
			if r.err != nil || r.res.IsError || !strings.Contains(r.res.Content[0].(*mcp.TextContent).Text, "slept") {
				t.Errorf("a %s-era call in flight at SIGTERM: %v %+v", r.era, r.err, r.res)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("a call in flight did not end\nstderr:\n%s", m.stderr)
		}
	}
	var exit time.Time
	select {
	case exit = <-exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("mcp-mux did not exit after draining\nstderr:\n%s", m.stderr)
	}
	<-rw.done
	took := exit.Sub(signalled)
	t.Logf("drain with 4 calls in flight (%d ms each): SIGTERM → exit %v; readiness 503 after %v, listener closed after %v",
		sleepMS, took.Round(time.Millisecond), rw.notReady.Sub(signalled).Round(time.Millisecond), rw.closed.Sub(signalled).Round(time.Millisecond))
	if rw.notReady.IsZero() || rw.closed.IsZero() || !rw.notReady.Before(rw.closed) {
		t.Errorf("readiness must fail before the listener closes: 503 at %v, closed at %v", rw.notReady, rw.closed)
	}
	if took > 10*time.Second {
		t.Errorf("mcp-mux took %v to exit: it should go once the calls are over, not wait for drain_timeout", took)
	}

	// The streams' endings.
	if got := oldTee.stream("GET").String(); !strings.Contains(got, "retry: 1000") {
		t.Errorf("the GET stream did not end with retry: (2025-11-25 transports): %q", got)
	}
	listen := newTee.stream("listen").String()
	if !strings.Contains(listen, `"resultType":"complete"`) || !strings.Contains(listen, `"io.modelcontextprotocol/subscriptionId"`) {
		t.Errorf("the listen stream did not end with its completion result (2026-07-28 subscriptions, Graceful Closure): %q", listen)
	}
	if !strings.Contains(m.stderr.String(), "drained") {
		t.Errorf("the log does not say the drain ended:\n%s", m.stderr)
	}
}

// TestDrainTimeoutAndSecondSignal: a call longer than drain_timeout is cut
// when it runs out, with an error, not a hang; and a second SIGTERM ends a
// drain at once.
func TestDrainTimeoutAndSecondSignal(t *testing.T) {
	canSignal(t, syscall.SIGTERM)
	for _, tc := range []struct {
		name    string
		timeout string
		second  bool
		within  time.Duration
	}{
		{"drain_timeout cuts", "1s", false, 5 * time.Second},
		{"a second signal", "30s", true, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testkit.WriteConfig(t, fmt.Sprintf("drain_timeout = %q", tc.timeout), []string{"f", "-name", "f"})
			m := startHTTPMux(t, cfg)
			errc := sleepInFlight(t, connectHTTP(t, m.url, "").cs, 60000)
			exited := make(chan struct{})
			go func() { m.cmd.Wait(); close(exited) }()
			signalled := time.Now()
			m.cmd.Process.Signal(syscall.SIGTERM)
			if tc.second {
				base := strings.TrimSuffix(m.url, "/mcp")
				testkit.Eventually(t, 2*time.Second, "/readyz to answer 503", func() bool {
					code, _ := probe(t, base+"/readyz")
					return code == http.StatusServiceUnavailable
				})
				m.cmd.Process.Signal(syscall.SIGTERM)
			}
			select {
			case <-exited:
			case <-time.After(tc.within):
				t.Fatalf("mcp-mux did not exit within %v\nstderr:\n%s", tc.within, m.stderr)
			}
			t.Logf("SIGTERM → exit: %v", time.Since(signalled).Round(time.Millisecond))
			select {
			case err := <-errc:
				if err == nil {
					t.Error("the cut call returned no error")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the cut call hangs")
			}
			if !strings.Contains(m.stderr.String(), "requests still in flight were cut") {
				t.Errorf("the log does not say a call was cut:\n%s", m.stderr)
			}
		})
	}
}

// sleepInFlight calls the fixture's f__sleep for ms on cs and returns once
// the backend has the call; the channel gets how it ended (a tool error as
// an error).
func sleepInFlight(t *testing.T, cs *mcp.ClientSession, ms int) <-chan error {
	t.Helper()
	before := requestsOf(t, cs)
	slept := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "f__sleep", Arguments: map[string]any{"ms": ms}})
		if err == nil && res.IsError {
			err = fmt.Errorf("%v", res.Content)
		}
		slept <- err
	}()
	polls := 0
	testkit.Eventually(t, 5*time.Second, "the call to reach the backend", func() bool {
		polls++ // each poll is a request of its own
		return requestsOf(t, cs)-polls > before
	})
	return slept
}
