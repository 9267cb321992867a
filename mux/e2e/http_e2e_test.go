package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// serving over HTTP (`serve --http`): several agents share one mcp-mux.

// httpMux is mcp-mux serving HTTP on a free loopback port.
type httpMux struct {
	cmd    *exec.Cmd
	url    string
	stderr *testkit.SyncBuffer
}

// The line that says where mcp-mux serves: a remote backend's "connecting" line
// carries a url= too.
var listeningRe = regexp.MustCompile(`serving over HTTP url=(http://\S+/mcp)`)

func startHTTPMux(t *testing.T, config string, env ...string) *httpMux {
	t.Helper()
	return startHTTPMuxAt(t, config, "127.0.0.1:0", env...)
}

// startHTTPMuxAt is startHTTPMux listening on addr: an instance restarted
// where its balancer expects it.
func startHTTPMuxAt(t *testing.T, config, addr string, env ...string) *httpMux {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), "serve", "--config", config, "--http", addr)
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	cmd.Env = append(cmd.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &httpMux{cmd: cmd, stderr: stderr}
	t.Cleanup(func() {
		stopProcess(cmd.Process)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("mcp-mux did not exit 10 s after SIGTERM; stderr:\n%s", stderr)
		}
	})
	if !testkit.Poll(10*time.Second, func() bool {
		m := listeningRe.FindStringSubmatch(stderr.String())
		if m != nil {
			h.url = m[1]
		}
		return m != nil
	}) {
		t.Fatalf("mcp-mux did not say where it listens; stderr:\n%s", stderr)
	}
	return h
}

// httpClient is one agent session over HTTP, recording what it is sent.
type httpClient struct {
	cs *mcp.ClientSession

	mu       sync.Mutex
	updated  []string
	more     chan struct{} // signalled when updated grows
	progress []float64
}

func connectHTTP(t *testing.T, url, token string) *httpClient {
	t.Helper()
	hc := &httpClient{more: make(chan struct{}, 1)}
	c := mcp.NewClient(&mcp.Implementation{Name: "http-e2e", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			hc.mu.Lock()
			hc.updated = append(hc.updated, r.Params.URI)
			hc.mu.Unlock()
			select {
			case hc.more <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			hc.mu.Lock()
			hc.progress = append(hc.progress, r.Params.Progress)
			hc.mu.Unlock()
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: url}
	if token != "" {
		tr.HTTPClient = &http.Client{Transport: withBearer{token}}
	}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	hc.cs = cs
	t.Cleanup(func() { cs.Close() })
	return hc
}

func (hc *httpClient) updates() []string {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return append([]string{}, hc.updated...)
}

// updatesPast waits until more than n updates came, at most until
// deadline, and reports whether they did.
func (hc *httpClient) updatesPast(n int, deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for len(hc.updates()) <= n {
		select {
		case <-hc.more:
		case <-timer.C:
			return len(hc.updates()) > n
		}
	}
	return true
}

func (hc *httpClient) progressSeen() int {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return len(hc.progress)
}

func (hc *httpClient) call(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	res, err := hc.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s: error result %+v", tool, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// fixtureStats is the fixture's own count of subscribe and unsubscribe
// requests, per URI.
func (hc *httpClient) fixtureStats(t *testing.T) (sub, unsub map[string]int) {
	t.Helper()
	var st struct {
		Subscribe   map[string]int `json:"subscribe"`
		Unsubscribe map[string]int `json:"unsubscribe"`
	}
	if err := json.Unmarshal([]byte(hc.call(t, "f__stats", nil)), &st); err != nil {
		t.Fatal(err)
	}
	return st.Subscribe, st.Unsubscribe
}

// The gateway scenario with real clients: two sessions on one URI make one
// backend subscribe; one unsubscribing leaves the other its updates; the
// last to leave makes one backend unsubscribe. Progress and updates reach
// only the session they belong to.
func TestHTTPSessionsShareBackendsButNotState(t *testing.T) {
	h := startHTTPMux(t, testkit.WriteConfig(t, `log_level = "debug"`, []string{"f", "-name", "f"}))
	a := connectHTTP(t, h.url, "")
	b := connectHTTP(t, h.url, "")
	const uri = "fixture://f/res/2"
	ctx := context.Background()
	for _, c := range []*httpClient{a, b} {
		if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("%v\nstderr:\n%s", err, h.stderr)
		}
	}
	if sub, _ := a.fixtureStats(t); sub[uri] != 1 {
		t.Fatalf("backend got %d subscribes for two sessions on one URI, want 1", sub[uri])
	}
	a.call(t, "f__update", map[string]any{"uri": uri})
	testkit.Eventually(t, 5*time.Second, "both sessions get the update", func() bool {
		return len(a.updates()) == 1 && len(b.updates()) == 1
	})

	if err := b.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if _, unsub := a.fixtureStats(t); unsub[uri] != 0 {
		t.Fatalf("backend unsubscribed while session A still holds %s", uri)
	}
	a.call(t, "f__update", map[string]any{"uri": uri})
	testkit.Eventually(t, 5*time.Second, "A gets the second update", func() bool { return len(a.updates()) == 2 })
	testkit.Quiet(200 * time.Millisecond) // B, unsubscribed, must not get it; it would by now, with A's
	if got := b.updates(); len(got) != 1 {
		t.Fatalf("B unsubscribed but got %d updates", len(got))
	}

	// Progress goes to the session whose request it is.
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__progress", Arguments: map[string]any{"steps": 3}, Meta: mcp.Meta{"progressToken": "tok"}})
	if err != nil || res.IsError {
		t.Fatalf("progress: %v %+v", err, res)
	}
	testkit.Eventually(t, 5*time.Second, "A gets its 3 progress notifications", func() bool { return a.progressSeen() == 3 })
	if n := b.progressSeen(); n != 0 {
		t.Fatalf("B got %d progress notifications of A's request", n)
	}

	// A leaves (DELETE): the last holder, so the backend unsubscribes.
	a.cs.Close()
	testkit.Eventually(t, 5*time.Second, "the backend is unsubscribed once the last holder left", func() bool {
		_, unsub := b.fixtureStats(t)
		return unsub[uri] == 1
	})
}

// A session idle past http_session_idle is ended and cleaned up like a
// stdio session whose agent went away.
func TestHTTPIdleSessionIsCleanedUp(t *testing.T) {
	h := startHTTPMux(t, testkit.WriteConfig(t, `http_session_idle = "1s"`, []string{"f", "-name", "f"}))
	a := connectHTTP(t, h.url, "")
	const uri = "fixture://f/res/1"
	if err := a.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	// a goes idle: 1 s after its last request it is ended, and the
	// backend unsubscribed (b's requests are b's: they keep only b alive).
	b := connectHTTP(t, h.url, "")
	testkit.Eventually(t, 10*time.Second, "the idle session's subscription is released at the backend", func() bool {
		_, unsub := b.fixtureStats(t)
		return unsub[uri] == 1
	})
}

func post(t *testing.T, url string, hdr map[string]string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestHTTPRefusesForeignOrigins(t *testing.T) {
	h := startHTTPMux(t, testkit.WriteConfig(t, "", []string{"f", "-name", "f"}))
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"", 200},
		{"http://localhost:3000", 200},
		{"http://127.0.0.1:8080", 200},
		{"http://evil.example", 403},
		{"null", 403},
	} {
		hdr := map[string]string{}
		if tc.origin != "" {
			hdr["Origin"] = tc.origin
		}
		if got := post(t, h.url, hdr); got != tc.want {
			t.Errorf("Origin %q: status %d, want %d", tc.origin, got, tc.want)
		}
	}
}

func TestHTTPTokenIsRequiredAndChecked(t *testing.T) {
	h := startHTTPMux(t, testkit.WriteConfig(t, `http_token = "${MUX_TEST_TOKEN}"`, []string{"f", "-name", "f"}), "MUX_TEST_TOKEN=s3cret-token")
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", 401},
		{"Bearer wrong", 401},
		{"s3cret-token", 401},
		{"Bearer s3cret-token", 200},
		// The scheme is case-insensitive (RFC 9110 §11.1).
		{"bearer s3cret-token", 200},
		{"BEARER s3cret-token", 200},
		{"bearer  s3cret-token", 200},
		{"bearers3cret-token", 401},
		{"Basic s3cret-token", 401},
	} {
		hdr := map[string]string{}
		if tc.auth != "" {
			hdr["Authorization"] = tc.auth
		}
		if got := post(t, h.url, hdr); got != tc.want {
			t.Errorf("Authorization %q: status %d, want %d", tc.auth, got, tc.want)
		}
	}
	c := connectHTTP(t, h.url, "s3cret-token")
	if _, err := c.cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h.stderr.String(), "s3cret-token") {
		t.Fatal("the token is in mcp-mux's log")
	}
}

func TestHTTPOnANonLoopbackAddressNeedsAToken(t *testing.T) {
	cmd := exec.Command(testkit.MuxBin(t), "serve", "--config", testkit.WriteConfig(t, "", []string{"f", "-name", "f"}), "--http", "0.0.0.0:0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("served 0.0.0.0 without a token")
	}
	if !strings.Contains(string(out), "http_token") {
		t.Fatalf("the refusal does not say how to fix it:\n%s", out)
	}
}

// A token the config asks for but that does not resolve is a mistake that
// stops mcp-mux from serving over HTTP on any address, never a server
// without a token.
func TestHTTPTokenThatIsNotUsableRefusesToServe(t *testing.T) {
	for _, tc := range []struct {
		name, line, env string
		want            []string
	}{
		{"unset variable", `http_token = "${MUX_TEST_UNSET_TOKEN}"`, "", []string{"MUX_TEST_UNSET_TOKEN", "not set"}},
		{"empty value", `http_token = ""`, "", []string{"empty"}},
		{"variable set to nothing", `http_token = "${MUX_TEST_EMPTY_TOKEN}"`, "MUX_TEST_EMPTY_TOKEN=", []string{"${MUX_TEST_EMPTY_TOKEN} is empty in the environment"}},
	} {
		for _, addr := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
			t.Run(tc.name+" on "+addr, func(t *testing.T) {
				cfg := testkit.WriteConfig(t, tc.line, []string{"f", "-name", "f"})
				cmd := exec.Command(testkit.MuxBin(t), "serve", "--config", cfg, "--http", addr)
				cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MUX_TEST_") })
				if tc.env != "" {
					cmd.Env = append(cmd.Env, tc.env)
				}
				out, err := runRefusal(t, cmd)
				if err == nil {
					t.Fatalf("exited 0: it must refuse to serve\n%s", out)
				}
				// FILE:LINE of the key (line 2 of the written config: after "[mux]").
				line := 0
				data, _ := os.ReadFile(cfg)
				for i, l := range strings.Split(string(data), "\n") {
					if strings.HasPrefix(l, "http_token") {
						line = i + 1
					}
				}
				if want := fmt.Sprintf("%s:%d", cfg, line); !strings.Contains(string(out), want) {
					t.Errorf("the refusal does not name %s:\n%s", want, out)
				}
				for _, w := range tc.want {
					if !strings.Contains(string(out), w) {
						t.Errorf("the refusal does not say %q:\n%s", w, out)
					}
				}
				if strings.Contains(string(out), "set [mux] http_token") {
					t.Errorf("the refusal asks for the http_token line that is already in the file:\n%s", out)
				}
			})
		}
	}
}

var _ = fmt.Sprintf

// A client of the current era (2026-07-28: server/discover, no session)
// is served statelessly, each request on its own.
func TestHTTPCurrentEraClient(t *testing.T) {
	h := startHTTPMux(t, testkit.WriteConfig(t, "", []string{"f", "-name", "f"}))
	c := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, h.stderr)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("negotiated %s, want the current era", v)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) == 0 {
		t.Fatal("no tools")
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "f__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v\nstderr:\n%s", err, res, h.stderr)
	}
}

// rawSession is an HTTP agent session driven by hand, to behave as no SDK
// client would.
type rawSession struct {
	url, id string
	next    int
}

const rawProtocol = "2025-11-25"

// rawInitialize opens a session: initialize, then notifications/initialized.
func rawInitialize(t *testing.T, url string) *rawSession {
	t.Helper()
	r := &rawSession{url: url}
	r.request(t, "initialize", map[string]any{
		"protocolVersion": rawProtocol, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"},
	})
	if r.id == "" {
		t.Fatal("initialize: no Mcp-Session-Id")
	}
	r.send(t, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return r
}

// request sends one request and returns the body of its answer (the
// go-sdk answers with an event stream that ends after the response).
func (r *rawSession) request(t *testing.T, method string, params any) string {
	t.Helper()
	r.next++
	return r.send(t, map[string]any{"jsonrpc": "2.0", "id": r.next, "method": method, "params": params})
}

func (r *rawSession) send(t *testing.T, msg any) string {
	t.Helper()
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest("POST", r.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.id != "" {
		req.Header.Set("Mcp-Session-Id", r.id)
		req.Header.Set("Mcp-Protocol-Version", rawProtocol)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s: %s", body, resp.Status, data)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		r.id = id
	}
	return string(data)
}

// openUnreadStream opens the session's event stream (GET) and, once its
// headers came, never reads it again: an agent that stopped reading, whose
// TCP buffers fill.
func (r *rawSession) openUnreadStream(t *testing.T) net.Conn {
	t.Helper()
	u, err := neturl.Parse(r.url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n\r\n", u.Path, u.Host, r.id, rawProtocol)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(conn, 16)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("GET stream: %v", err)
		}
		if strings.HasPrefix(line, "HTTP/") && !strings.Contains(line, " 200") {
			t.Fatalf("GET stream: %s", line)
		}
		if line == "\r\n" {
			return conn
		}
	}
}

// vmRSS is the resident memory of process pid in bytes, or -1 where /proc
// does not tell it.
func vmRSS(pid int) int64 {
	if runtime.GOOS == "windows" {
		return -1 // and /proc would be Linux's, under Wine
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// One agent that stops reading its event stream while a backend floods
// updates for its URI costs only itself: another session keeps getting its
// own updates and answers within a second, and mcp-mux's memory stays
// bounded.
func TestHTTPStalledAgentDoesNotDelayOtherSessions(t *testing.T) {
	h := startHTTPMux(t, testkit.WriteConfig(t, "", []string{"f", "-name", "f"}))
	stalled := rawInitialize(t, h.url)
	if body := stalled.request(t, "resources/subscribe", map[string]any{"uri": "fixture://f/res/1"}); !strings.Contains(body, `"result"`) {
		t.Fatalf("subscribe: %s", body)
	}
	stalled.openUnreadStream(t)

	normal := connectHTTP(t, h.url, "")
	const own = "fixture://f/res/2"
	ctx := context.Background()
	if err := normal.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: own}); err != nil {
		t.Fatal(err)
	}
	base := vmRSS(h.cmd.Process.Pid)

	// The flood: 4 KiB updates under the stalled session's URI, many MiB
	// more than TCP buffers hold, for as long as the probes run (paced, so
	// that the probes measure mcp-mux, not a machine out of CPU).
	flood := "fixture://f/res/1/" + strings.Repeat("x", 4096)
	stop := make(chan struct{})
	floodDone := make(chan error, 1)
	var floods atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				floodDone <- nil
				return
			default:
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := normal.cs.CallTool(cctx, &mcp.CallToolParams{Name: "f__update", Arguments: map[string]any{"uri": flood, "count": 250}})
			cancel()
			if err != nil {
				floodDone <- err
				return
			}
			floods.Add(1)
			// Pacing, not a wait: floods 50 ms apart, so that the probes
			// measure mcp-mux and not a machine out of CPU. The probes'
			// bounds are checked whatever the pace.
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() { close(stop); <-floodDone }()

	var peak int64
	var worstCall, worstUpdate time.Duration
	for i := range 15 {
		// Pacing, not a wait: probes spread over the flood's 3 s. Each
		// checks its own call and update within its own second.
		time.Sleep(200 * time.Millisecond)
		before := len(normal.updates())
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := normal.cs.CallTool(cctx, &mcp.CallToolParams{Name: "f__update", Arguments: map[string]any{"uri": own}})
		cancel()
		took := time.Since(start)
		worstCall = max(worstCall, took)
		if err != nil || took > time.Second {
			t.Fatalf("probe %d: the normal session's call took %v (err %v) while another agent stalls; stderr:\n%.2000s", i, took, err, h.stderr)
		}
		if !normal.updatesPast(before, start.Add(time.Second)) {
			t.Fatalf("probe %d: the normal session's own update did not come within 1 s while another agent stalls (%d floods sent)", i, floods.Load())
		}
		worstUpdate = max(worstUpdate, time.Since(start))
		peak = max(peak, vmRSS(h.cmd.Process.Pid))
	}
	for _, u := range normal.updates() {
		if u != own {
			t.Fatalf("the normal session got an update for %.40s..., which it did not subscribe to", u)
		}
	}
	t.Logf("floods of 250×4 KiB sent: %d; worst call %v, worst own update %v; RSS base %d MiB, peak %d MiB",
		floods.Load(), worstCall, worstUpdate, base>>20, peak>>20)
	if floods.Load() == 0 {
		t.Fatal("the flood did not run")
	}
	if base > 0 && peak > base+64<<20 {
		t.Fatalf("mcp-mux's RSS grew from %d MiB to %d MiB with one stalled agent", base>>20, peak>>20)
	}
}

// No session reads another's state: mcp-mux://subscriptions lists the
// reading session's own subscriptions, and a cancellation names only the
// sender's own requests.
func TestHTTPSessionsCannotReadOrCancelEachOthersState(t *testing.T) {
	h := startHTTPMux(t, testkit.WriteConfig(t, "", []string{"f", "-name", "f"}))
	a := connectHTTP(t, h.url, "")
	b := connectHTTP(t, h.url, "")
	ctx := context.Background()
	if err := a.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "fixture://f/res/1"}); err != nil {
		t.Fatal(err)
	}
	if err := b.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "fixture://f/res/2"}); err != nil {
		t.Fatal(err)
	}
	res, err := b.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mcp-mux://subscriptions"})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Contents[0].Text; strings.Contains(text, "res/1") || !strings.Contains(text, "res/2") {
		t.Fatalf("session B reads:\n%s\nwant its own subscription only", text)
	}

	// A's call is in flight; B cancels every request id A could have used.
	done := make(chan error, 1)
	called := testkit.Arrived(func() int { return testkit.Requests(b.call(t, "f__stats", nil)) })
	go func() {
		r, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__sleep", Arguments: map[string]any{"ms": 2000}})
		if err == nil && r.IsError {
			err = fmt.Errorf("error result %+v", r)
		}
		done <- err
	}()
	testkit.Eventually(t, 5*time.Second, "A's call to be at the backend", called)
	for id := 1; id <= 20; id++ {
		req, _ := http.NewRequest("POST", h.url, strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"not yours"}}`, id)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", b.cs.ID())
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	select {
	case err := <-done:
		t.Fatalf("A's call ended (%v) before B's cancellations were all sent: the test checked nothing", err)
	default:
	}
	if err := <-done; err != nil {
		t.Fatalf("A's call was cancelled by B's notifications: %v", err)
	}
}

// Over HTTP the current era is served statelessly: a subscription lives as
// long as the subscriptions/listen request that carries it. Its update
// arrives on that stream; ending the stream releases it at the backend.
func TestHTTPCurrentEraSubscriptionLivesAsLongAsItsListen(t *testing.T) {
	h := startHTTPMux(t, testkit.WriteConfig(t, "", []string{"f", "-name", "f"}))
	updated := make(chan string, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, h.stderr)
	}
	defer cs.Close()
	const uri = "fixture://f/res/3"
	listening := make(chan error, 1)
	go func() { listening <- cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}) }()
	hc := &httpClient{cs: cs}
	testkit.Eventually(t, 5*time.Second, "the backend is subscribed through the listen stream", func() bool {
		sub, _ := hc.fixtureStats(t)
		return sub[uri] == 1
	})
	hc.call(t, "f__update", map[string]any{"uri": uri})
	select {
	case got := <-updated:
		if got != uri {
			t.Fatalf("update for %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no update on the listen stream\nstderr:\n%s", h.stderr)
	}
	if err := cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "ending the listen stream releases the subscription at the backend", func() bool {
		_, unsub := hc.fixtureStats(t)
		return unsub[uri] == 1
	})
	select {
	case <-listening:
	case <-time.After(5 * time.Second):
		t.Fatal("Subscribe did not return after Unsubscribe")
	}
}

// runRefusal runs cmd, a serve that must refuse to start: its output and
// how it ended. One still serving after 30 s fails the test.
func runRefusal(t *testing.T, cmd *exec.Cmd) ([]byte, error) {
	t.Helper()
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still serving after 30s: it must refuse at once\n%s", out)
	}
	return out, err
}
