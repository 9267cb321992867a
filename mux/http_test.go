package mux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// serveHTTP serves m over HTTP on a loopback port until the test ends and
// returns the endpoint.
func serveHTTP(t *testing.T, m *Mux, o door.HTTPOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveHTTPOn(t, m, ln, o)
}

// serveHTTPOn is serveHTTP on ln.
func serveHTTPOn(t *testing.T, m *Mux, ln net.Listener, o door.HTTPOptions) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ServeHTTP(ctx, ln, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	})
	return "http://" + ln.Addr().String() + door.HTTPPath
}

// closeWatch is a listener whose connections tell when the server closed
// them.
type closeWatch struct {
	net.Listener
	mu     sync.Mutex
	closed map[string]bool // by the remote (the client's) address
}

func (l *closeWatch) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, l: l}, nil
}

// closedFor reports whether the server closed its end of the connection
// whose client end is at addr.
func (l *closeWatch) closedFor(addr net.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed[addr.String()]
}

type watchedConn struct {
	net.Conn
	l *closeWatch
}

func (c *watchedConn) Close() error {
	c.l.mu.Lock()
	if c.l.closed == nil {
		c.l.closed = map[string]bool{}
	}
	c.l.closed[c.RemoteAddr().String()] = true
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// postJSONRPC posts one message in session sid ("" for none) and returns
// the answer's body and session id.
func postJSONRPC(t *testing.T, url, sid, msg string) (string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s %s", msg, resp.Status, body)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		sid = id
	}
	return string(body), sid
}

// An agent that reads nothing of its event stream for WriteTimeout loses
// that stream's connection, and with it what waited on the write.
func TestHTTPStreamOfAnAgentThatStoppedReadingIsClosed(t *testing.T) {
	m := startMux(t, fixture(t, "f"))
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &closeWatch{Listener: tcp}
	url := serveHTTPOn(t, m, ln, door.HTTPOptions{WriteTimeout: 300 * time.Millisecond})

	_, sid := postJSONRPC(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	postJSONRPC(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if body, _ := postJSONRPC(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fixture://f/res/1"}}`); !strings.Contains(body, `"result"`) {
		t.Fatalf("subscribe: %s", body)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(url, door.HTTPPath), "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n", door.HTTPPath, host, sid)
	br := bufio.NewReaderSize(conn, 16)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, " 200") {
		t.Fatalf("GET: %q %v", line, err)
	}

	// Many MiB of updates for the URI, more than TCP buffers hold; the
	// agent reads none of them.
	cs := connect(t, m, nil)
	flood := "fixture://f/res/1/" + strings.Repeat("x", 4096)
	for range 6 {
		callText(t, cs, "f__update", map[string]any{"uri": flood, "count": 500})
	}
	// The last write blocks past the timeout, and mux closes the connection.
	testkit.Eventually(t, 10*time.Second, "mux to close the stream's connection", func() bool { return ln.closedFor(conn.LocalAddr()) })

	// Reading now gets what was buffered, then the end: mux closed it.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the stream of an agent that read nothing for a second is still open (%d bytes read); want it closed after the 300ms write timeout", n)
	}
	t.Logf("read %d bytes, then %v", n, err)

	// The session goes on: its agent may open a new stream.
	if body, _ := postJSONRPC(t, url, sid, `{"jsonrpc":"2.0","id":3,"method":"ping"}`); !strings.Contains(body, `"result"`) {
		t.Fatalf("ping after the stream closed: %s", body)
	}
}

// A connection that waits for the agent's next request is closed after
// KeepAlive (its buffers and goroutine are most of an idle session's
// memory), while the session and its open event stream go on.
func TestHTTPIdleConnectionIsClosedAndTheSessionGoesOn(t *testing.T) {
	m := startMux(t, fixture(t, "f"))
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &closeWatch{Listener: tcp}
	url := serveHTTPOn(t, m, ln, door.HTTPOptions{KeepAlive: 200 * time.Millisecond})
	host := strings.TrimPrefix(strings.TrimSuffix(url, door.HTTPPath), "http://")

	_, sid := postJSONRPC(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	postJSONRPC(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	// The session's event stream first: it is older than the idle
	// connection below, so were it closed as idle, it would be first.
	stream, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	fmt.Fprintf(stream, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n", door.HTTPPath, host, sid)
	stream.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(stream).ReadString('\n'); err != nil || !strings.Contains(line, " 200") {
		t.Fatalf("GET: %q %v", line, err)
	}

	// One request on a keep-alive connection, answered; then nothing.
	idle, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	body := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	fmt.Fprintf(idle, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: %d\r\n\r\n%s", door.HTTPPath, host, sid, len(body), body)
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(got), `"result"`) || resp.Close {
		t.Fatalf("ping: %s %q %v (close %v)", resp.Status, got, err, resp.Close)
	}

	testkit.Eventually(t, 5*time.Second, "mux to close the idle connection", func() bool { return ln.closedFor(idle.LocalAddr()) })
	if ln.closedFor(stream.LocalAddr()) {
		t.Fatal("the session's event stream was closed as an idle connection")
	}
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on the closed idle connection: %d, %v; want EOF", n, err)
	}
	// The session goes on, over a new connection.
	if body, _ := postJSONRPC(t, url, sid, `{"jsonrpc":"2.0","id":3,"method":"ping"}`); !strings.Contains(body, `"result"`) {
		t.Fatalf("ping after the idle connection closed: %s", body)
	}
}

// A request of the current era is a session of its own: it ends with the
// request, whether a call or a subscriptions/listen stream, and mux keeps
// nothing of it (nor a goroutine per stream to notice its end).
func TestHTTPCurrentEraRequestsLeaveNoSession(t *testing.T) {
	m := startMux(t, fixture(t, "f"))
	url := serveHTTP(t, m, door.HTTPOptions{})
	sessions := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.sessions)
	}
	before := sessions()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: modernEra})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for range 5 {
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "f__echo", Arguments: map[string]any{"text": "x"}}); err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
	}
	testkit.Eventually(t, 5*time.Second, "the calls' sessions to end", func() bool { return sessions() == before })

	lctx, stop := context.WithCancel(context.Background())
	listened := make(chan error, 1)
	go func() { listened <- cs.Subscribe(lctx, &mcp.SubscribeParams{URI: "fixture://f/res/1"}) }()
	testkit.Eventually(t, 5*time.Second, "the listen stream's session", func() bool { return sessions() == before+1 })
	if testkit.GoroutineIn("mux.(*Mux).session.func") {
		t.Error("a goroutine waits for the listen stream's session to end")
	}
	if err := cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: "fixture://f/res/1"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the listen stream's session to end with it", func() bool { return sessions() == before })
	stop()
	<-listened
}

// A request the agent cancels gets no response (MCP: its receiver sends
// none), on the go-sdk's path too: here call_tool, mux's own tool, which
// the fast path leaves to it. The agent keeps the call's stream open after
// its notifications/cancelled, as the TypeScript client does.
func TestHTTPCancelledCallOnTheSDKsPathGetsNoResponse(t *testing.T) {
	cfg := testConfig(fixture(t, "notes"))
	cfg.Mux.ToolList = config.ToolListSearch // where call_tool runs a tool
	m := startMuxConfig(t, cfg)
	cs, _ := httpAgent(t, m, nil)
	url := serveHTTP(t, m, door.HTTPOptions{SessionIdle: time.Minute})
	sid := rawInitialize(t, url)
	called := arrived(t, cs, "notes__stats")
	stream := postInBackground(t, url, sid, `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"call_tool","arguments":{"name":"notes__sleep","arguments":{"ms":30000}}}}`)
	testkit.Eventually(t, 5*time.Second, "the call to be at the backend", called)
	resp, err := rawPost(testkit.CtxT(t), url, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"the user pressed stop"}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case body := <-stream:
		if strings.Contains(body, `"id":"c1"`) {
			t.Errorf("the cancelled call got a response: %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call's stream still open 10s after the cancel")
	}
	testkit.Eventually(t, 5*time.Second, "the backend to be told, with the reason", func() bool {
		st := fixtureStats(t, cs, "notes__stats")
		return st.Cancelled == 1 && len(st.CancelReasons) == 1 && st.CancelReasons[0] == "the user pressed stop"
	})
}
