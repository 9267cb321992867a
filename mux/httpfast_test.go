package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The HTTP fast path (http.go, mux/door): calls and reads of an HTTP session go
// as bytes, and keep what the go-sdk's path gives: progress and the
// backend's requests on the request's own stream, cancellation with the
// agent's reason, one response per request id.

// wireLog is an HTTP client that records, for each POST, the JSON-RPC
// method it carried, the response's Content-Type and its body.
type wireLog struct {
	mu    sync.Mutex
	posts []wirePost
}

type wirePost struct {
	method, contentType, body string
}

func (l *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	method := ""
	if r.Method == http.MethodPost && r.Body != nil {
		data, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(data))
		var msg struct {
			Method string `json:"method"`
		}
		json.Unmarshal(data, &msg)
		method = msg.Method
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || method == "" {
		return resp, err
	}
	ct := resp.Header.Get("Content-Type")
	resp.Body = &recordedBody{ReadCloser: resp.Body, done: func(body string) {
		l.mu.Lock()
		l.posts = append(l.posts, wirePost{method, ct, body})
		l.mu.Unlock()
	}}
	return resp, nil
}

// recordedBody calls done with what was read of it when it is closed.
type recordedBody struct {
	io.ReadCloser
	buf  bytes.Buffer
	once sync.Once
	done func(string)
}

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.buf.Write(p[:n])
	return n, err
}

func (b *recordedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.done(b.buf.String()) })
	return err
}

func (l *wireLog) of(method string) []wirePost {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []wirePost
	for _, p := range l.posts {
		if p.method == method {
			out = append(out, p)
		}
	}
	return out
}

// httpAgent connects a handshake-era go-sdk client to m over HTTP, its
// POSTs recorded in the returned log.
func httpAgent(t *testing.T, m *Mux, opts *mcp.ClientOptions) (*mcp.ClientSession, *wireLog) {
	t.Helper()
	return httpAgentAt(t, m, opts, "2025-11-25")
}

// httpAgentAt is httpAgent at protocol version (modernEra: each request
// on its own, no session).
func httpAgentAt(t *testing.T, m *Mux, opts *mcp.ClientOptions, version string) (*mcp.ClientSession, *wireLog) {
	t.Helper()
	url := serveHTTP(t, m, door.HTTPOptions{SessionIdle: time.Minute, MaxBody: 1 << 20})
	log := &wireLog{}
	c := mcp.NewClient(&mcp.Implementation{Name: "http-agent", Version: "1"}, opts)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: log}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	// After the first list, as agents do: until it, requests wait for the
	// backends on the go-sdk's path.
	if _, err := cs.ListTools(testkit.CtxT(t), nil); err != nil {
		t.Fatal(err)
	}
	return cs, log
}

// fastOnly fails t if a tools/call of log went the go-sdk's way: every
// response is JSON but those with messages before them.
func fastOnly(t *testing.T, log *wireLog) {
	t.Helper()
	for _, p := range log.of("tools/call") {
		if p.contentType != "application/json" && strings.Count(p.body, "data: ") < 2 {
			t.Errorf("a tools/call answered as %q with nothing before its response: the go-sdk's path, not the fast one: %s", p.contentType, p.body)
		}
	}
}

// A tools/call or resources/read goes as bytes, answered as JSON, from a
// session of the handshake era and from an agent of the current era (no
// session: not through a go-sdk session made for the request either).
func TestHTTPCallsAndReadsGoAsBytes(t *testing.T) {
	for _, version := range []string{"2025-11-25", modernEra} {
		t.Run(version, func(t *testing.T) {
			m := startMux(t, fixture(t, "notes"))
			cs, log := httpAgentAt(t, m, nil, version)
			if got := callText(t, cs, "notes__echo", map[string]any{"text": "hi"}); got != `{"text":"hi"}` {
				t.Fatalf("echo: %q", got)
			}
			res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: "fixture://notes/res/1"})
			if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "notes resource 1" {
				t.Fatalf("read: %+v, %v", res, err)
			}
			for _, method := range []string{"tools/call", "resources/read"} {
				posts := log.of(method)
				if len(posts) == 0 {
					t.Fatalf("no %s POST recorded", method)
				}
				// The go-sdk's path answers with an event stream; the fast
				// path with the backend's response as JSON, nothing came
				// before it.
				if p := posts[len(posts)-1]; p.contentType != "application/json" {
					t.Errorf("%s answered as %q, want application/json (the fast path): %s", method, p.contentType, p.body)
				}
			}
			m.mu.Lock()
			n := len(m.stateless)
			m.mu.Unlock()
			if n != 0 {
				t.Errorf("%d sessions of stateless requests left after they were answered", n)
			}
		})
	}
}

func TestHTTPProgressAndSamplingGoOnTheRequestsOwnStream(t *testing.T) {
	m := startMux(t, fixture(t, "llm", "-client-requests"))
	var mu sync.Mutex
	var progress []string
	a := &sampler{name: "A"}
	cs, log := httpAgent(t, m, &mcp.ClientOptions{
		CreateMessageWithToolsHandler: a.handle,
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, fmt.Sprintf("%v:%s", r.Params.ProgressToken, r.Params.Message))
			mu.Unlock()
		},
	})
	params := &mcp.CallToolParams{Name: "llm__progress", Arguments: map[string]any{"steps": 3}}
	params.SetProgressToken("mine")
	res, err := cs.CallTool(testkit.CtxT(t), params)
	if err != nil || text(t, res.Content) != "done" {
		t.Fatalf("progress call: %v, %v", res, err)
	}
	// (The go-sdk client hands notifications to their handler on a
	// goroutine of its own: they may be seen after the call returns.)
	var got string
	testkit.Poll(5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		got = strings.Join(progress, ",")
		return len(progress) >= 3
	})
	if got != "mine:step 1/3,mine:step 2/3,mine:step 3/3" {
		t.Errorf("progress seen: %q, want three steps under the agent's token", got)
	}
	if got := callText(t, cs, "llm__sample", map[string]any{"prompt": "hi"}); got != "A says: hi model=A-model" {
		t.Fatalf("sampling inside the call: %q", got)
	}
	// Each POST is recorded when the client closes its body, which may
	// be after the call returned.
	var posts []wirePost
	testkit.Poll(5*time.Second, func() bool {
		posts = log.of("tools/call")
		return len(posts) >= 2
	})
	var onStream int
	for _, p := range posts {
		if strings.Contains(p.body, `"method":"sampling/createMessage"`) {
			onStream++
			if p.contentType != "text/event-stream" {
				t.Errorf("a response with a request before it came as %q", p.contentType)
			}
		}
		if strings.Contains(p.body, `"method":"notifications/progress"`) && !strings.Contains(p.body, `"progressToken":"mine"`) {
			t.Errorf("progress on the call's stream without the agent's token: %s", p.body)
		}
	}
	if onStream != 1 {
		t.Errorf("the sampling request came on %d tools/call streams, want the calling one", onStream)
	}
	fastOnly(t, log)
}

func TestHTTPCancelledCallReachesTheBackendWithTheReason(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs, log := httpAgent(t, m, nil)
	called := arrived(t, cs, "notes__stats")
	ctx, cancel := context.WithCancel(testkit.CtxT(t))
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes__sleep", Arguments: map[string]any{"ms": 30000}})
		errc <- err
	}()
	testkit.Eventually(t, 5*time.Second, "the call to be at the backend", called)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call succeeded")
	}
	testkit.Eventually(t, 5*time.Second, "the backend to be told, with a reason", func() bool {
		st := fixtureStats(t, cs, "notes__stats")
		return st.Cancelled == 1 && len(st.CancelReasons) == 1 && st.CancelReasons[0] != ""
	})
	for _, p := range log.of("notifications/cancelled") {
		if p.contentType != "" && !strings.HasPrefix(p.contentType, "text/plain") {
			t.Errorf("notifications/cancelled answered with %q: %s", p.contentType, p.body)
		}
	}
	fastOnly(t, log)
}

func TestHTTPAgentGoneMidCallCancelsItAtTheBackend(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs, _ := httpAgent(t, m, nil)
	url := serveHTTP(t, m, door.HTTPOptions{SessionIdle: time.Minute})
	sid := rawInitialize(t, url)
	called := arrived(t, cs, "notes__stats")
	ctx, cancel := context.WithCancel(testkit.CtxT(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := rawPost(ctx, url, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"notes__sleep","arguments":{"ms":30000}}}`)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	testkit.Eventually(t, 5*time.Second, "the call to be at the backend", called)
	cancel() // the connection closes: the agent can never get the response
	<-done
	testkit.Eventually(t, 5*time.Second, "the backend to be told", func() bool {
		return fixtureStats(t, cs, "notes__stats").Cancelled == 1
	})
}

func TestHTTPRequestIDInFlightTwiceIsRefused(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs, _ := httpAgent(t, m, nil)
	url := serveHTTP(t, m, door.HTTPOptions{SessionIdle: time.Minute})
	sid := rawInitialize(t, url)
	called := arrived(t, cs, "notes__stats")
	const sleep = `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"notes__sleep","arguments":{"ms":1000}}}`
	first := postInBackground(t, url, sid, sleep)
	testkit.Eventually(t, 5*time.Second, "the first call to be at the backend", called)
	resp, err := rawPost(testkit.CtxT(t), url, sid, sleep)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "-32600") {
		t.Errorf("the same id again: %d %s, want 400 with -32600", resp.StatusCode, body)
	}
	if got := <-first; !strings.Contains(got, `"text":"slept"`) {
		t.Errorf("the first call: %s", got)
	}
}

// rawInitialize starts a handshake-era session at url by hand and returns
// its Mcp-Session-Id.
func rawInitialize(t *testing.T, url string) string {
	t.Helper()
	resp, err := rawPost(testkit.CtxT(t), url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %s, no session id", resp.Status)
	}
	resp, err = rawPost(testkit.CtxT(t), url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return sid
}

// postInBackground POSTs body in session sid at url, and returns where the
// whole response body (or the error) arrives.
func postInBackground(t *testing.T, url, sid, body string) <-chan string {
	out := make(chan string, 1)
	go func() {
		resp, err := rawPost(testkit.CtxT(t), url, sid, body)
		if err != nil {
			out <- err.Error()
			return
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out <- string(data)
	}()
	return out
}

func rawPost(ctx context.Context, url, sid, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	return http.DefaultClient.Do(req)
}

// modernPost POSTs a current-era request body with the headers the era
// requires, name as its Mcp-Name.
func modernPost(ctx context.Context, url, method, name, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", modernEra)
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	return http.DefaultClient.Do(req)
}

// What the go-sdk would refuse still gets its answer: an Mcp-Name that
// does not match the body is a header mismatch, not a call.
func TestHTTPCurrentEraHeaderMismatchIsTheSDKsToAnswer(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs, _ := httpAgent(t, m, nil) // the backends are up
	url := serveHTTP(t, m, door.HTTPOptions{})
	called := arrived(t, cs, "notes__stats")
	resp, err := modernPost(testkit.CtxT(t), url, "tools/call", "notes__other",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes__echo","arguments":{"text":"x"},`+modernMeta+`}}`)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "header mismatch") {
		t.Errorf("mismatched Mcp-Name: %s %s, want 400 and the go-sdk's header mismatch", resp.Status, body)
	}
	if called() {
		t.Error("the mismatched call reached the backend")
	}
}

// A current-era agent that goes away mid-call (its request's connection
// closes: the era's way to cancel) has the call cancelled at the backend.
func TestHTTPCurrentEraAgentGoneMidCallCancelsItAtTheBackend(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs, _ := httpAgent(t, m, nil)
	url := serveHTTP(t, m, door.HTTPOptions{})
	called := arrived(t, cs, "notes__stats")
	ctx, cancel := context.WithCancel(testkit.CtxT(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := modernPost(ctx, url, "tools/call", "notes__sleep",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"notes__sleep","arguments":{"ms":30000},`+modernMeta+`}}`)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	testkit.Eventually(t, 5*time.Second, "the call to be at the backend", called)
	cancel()
	<-done
	testkit.Eventually(t, 5*time.Second, "the backend to be told", func() bool {
		return fixtureStats(t, cs, "notes__stats").Cancelled == 1
	})
}

// A current-era agent's _meta is decoded once and reused by its next
// requests, but each request is still checked against it: one whose
// MCP-Protocol-Version header is not its _meta's is the go-sdk's to answer,
// as it was before mux kept any.
func TestHTTPCurrentEraMetaIsDecodedOnceAndStillChecked(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	httpAgent(t, m, nil) // the backends are up
	url := serveHTTP(t, m, door.HTTPOptions{})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes__echo","arguments":{"text":"x"},` + modernMeta + `}}`
	for range 2 {
		resp, err := modernPost(testkit.CtxT(t), url, "tools/call", "notes__echo", body)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"result"`) {
			t.Fatalf("tools/call: %s %s", resp.Status, got)
		}
	}
	// What is kept of them: mux/door's TestAgentMetaIsDecodedOnce.

	req, _ := http.NewRequestWithContext(testkit.CtxT(t), "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2099-01-01")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "notes__echo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), "does not match") {
		t.Errorf("a header of another version than the _meta's: %s %s, want 400 and the go-sdk's mismatch", resp.Status, got)
	}
}
