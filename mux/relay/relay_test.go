package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/mux/rendezvous"
)

// fakeProcess is a long-lived process that hands each session's
// connection to the test.
type fakeProcess struct {
	ln    *rendezvous.Listener
	pid   int
	conns chan *fakeConn
}

type fakeConn struct {
	hello *rendezvous.Hello
	c     net.Conn
	rd    *bufio.Reader
}

func (f *fakeConn) line(t *testing.T) map[string]any {
	t.Helper()
	f.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	l, err := f.rd.ReadBytes('\n')
	if err != nil {
		t.Fatalf("the process read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(l, &m); err != nil {
		t.Fatalf("the process read %q: %v", l, err)
	}
	return m
}

func (f *fakeConn) send(t *testing.T, s string) {
	t.Helper()
	if _, err := f.c.Write([]byte(s + "\n")); err != nil {
		t.Fatal(err)
	}
}

func startFake(t *testing.T, p rendezvous.Place, pid int) *fakeProcess {
	ln, err := rendezvous.Listen(p)
	if err != nil {
		t.Errorf("fake process: %v", err)
		return nil
	}
	f := &fakeProcess{ln: ln, pid: pid, conns: make(chan *fakeConn, 4)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			rd := bufio.NewReader(c)
			h, err := rendezvous.ReadHello(rd)
			if err != nil {
				c.Close()
				continue
			}
			rendezvous.WriteWelcome(c, rendezvous.Welcome{PID: pid})
			f.conns <- &fakeConn{hello: h, c: c, rd: rd}
		}
	}()
	return f
}

// agent is the agent's end of the session: its stdin and stdout.
type agent struct {
	in  *io.PipeWriter
	out *bufio.Reader
}

func (a *agent) send(t *testing.T, s string) {
	t.Helper()
	if _, err := a.in.Write([]byte(s + "\n")); err != nil {
		t.Fatal(err)
	}
}

func (a *agent) line(t *testing.T) map[string]any {
	t.Helper()
	got := make(chan []byte, 1)
	go func() { l, _ := a.out.ReadBytes('\n'); got <- l }()
	select {
	case l := <-got:
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("the agent read %q: %v", l, err)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("the agent read nothing in 10 s")
		return nil
	}
}

// testPlace is a place of the test's own, in a directory whose socket
// path fits.
func testPlace(t *testing.T) rendezvous.Place {
	t.Helper()
	base := "/tmp"
	if runtime.GOOS == "windows" {
		base = ""
	}
	d, err := os.MkdirTemp(base, "rl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	cfg := filepath.Join(d, "c.toml")
	os.WriteFile(cfg, nil, 0o600)
	p, err := rendezvous.For(filepath.Join(d, "run"), cfg, "b1")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestASessionOutlivesItsProcess(t *testing.T) {
	p := testPlace(t)
	procs := make(chan *fakeProcess, 2)
	pid := 100
	spawn := func() (<-chan struct{}, error) { pid++; procs <- startFake(t, p, pid); return nil, nil }
	r, err := Connect(Options{Place: p, Hello: rendezvous.Hello{PID: 7}, Spawn: spawn})
	if err != nil {
		t.Fatal(err)
	}
	first := <-procs
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &agent{in: inW, out: bufio.NewReader(outR)}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background(), inR, outW) }()

	c1 := <-first.conns
	a.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := c1.line(t); m["method"] != "initialize" {
		t.Fatalf("first line %v", m)
	}
	c1.send(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"mcp-mux","version":"x"}}}`)
	if m := a.line(t); m["id"] != float64(1) {
		t.Fatalf("agent got %v", m)
	}
	a.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	a.send(t, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"test://a"}}`)
	c1.line(t)
	c1.line(t)
	c1.send(t, `{"jsonrpc":"2.0","id":2,"result":{}}`)
	a.line(t)
	a.send(t, `{"jsonrpc":"2.0","id":"call-3","method":"tools/call","params":{"name":"slow"}}`)
	c1.line(t)
	// kill -9: the connection ends, the lock is freed.
	c1.c.Close()
	first.ln.Close()

	m := a.line(t)
	e, _ := m["error"].(map[string]any)
	if m["id"] != "call-3" || e == nil || !strings.Contains(e["message"].(string), "ended while this request was in flight") {
		t.Fatalf("in-flight call answered with %v", m)
	}
	second := <-procs
	c2 := <-second.conns
	if !c2.hello.Replay {
		t.Error("the new process's hello does not say it is a replay")
	}
	init := c2.line(t)
	if init["method"] != "initialize" || init["id"] != "mcp-mux-replay-1" {
		t.Fatalf("replayed %v", init)
	}
	c2.send(t, `{"jsonrpc":"2.0","id":"mcp-mux-replay-1","result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"mcp-mux","version":"x"}}}`)
	if m := c2.line(t); m["method"] != "notifications/initialized" {
		t.Fatalf("replayed %v", m)
	}
	sub := c2.line(t)
	if sub["method"] != "resources/subscribe" {
		t.Fatalf("replayed %v", sub)
	}
	c2.send(t, `{"jsonrpc":"2.0","id":`+mustJSON(sub["id"])+`,"result":{}}`)
	// The agent goes on, and sees none of the replay's answers.
	a.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	if m := c2.line(t); m["id"] != float64(4) {
		t.Fatalf("after the replay the process read %v", m)
	}
	c2.send(t, `{"jsonrpc":"2.0","id":4,"result":{"tools":[]}}`)
	if m := a.line(t); m["id"] != float64(4) {
		t.Fatalf("the agent's next line is %v, want the answer to 4", m)
	}
	// The agent's stdin ends: the process sees the end of the session.
	inW.Close()
	c2.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c2.rd.ReadByte(); err != io.EOF {
		t.Fatalf("after stdin's end the process read %v, want EOF", err)
	}
	c2.c.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end")
	}
	second.ln.Close()
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestPeekFindsTheMembersAtTheTop(t *testing.T) {
	for _, tt := range []struct {
		line, id, method, uri string
		ok                    bool
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"x"}`, "7", "x", "", true},
		{`{"result":{"id":1,"method":"no"},"id":"a\"b"}`, `"a\"b"`, "", "", true},
		{` { "method" : "resources/subscribe" , "params" : {"uri":"f://x"}, "id" : [1] }`, "[1]", "resources/subscribe", `"f://x"`, true},
		{`[{"id":1}]`, "", "", "", false},
		{`{"id":`, "", "", "", false},
	} {
		m := peek([]byte(tt.line))
		if string(m.id) != tt.id || m.method != tt.method || m.uri != tt.uri || m.ok != tt.ok {
			t.Errorf("peek(%s) = id %s method %q uri %s ok %v", tt.line, m.id, m.method, m.uri, m.ok)
		}
	}
}

func TestALineLongerThanTheBoundGoesOnInPieces(t *testing.T) {
	p := testPlace(t)
	procs := make(chan *fakeProcess, 1)
	r, err := Connect(Options{Place: p, MaxLine: 100 << 10, Spawn: func() (<-chan struct{}, error) { procs <- startFake(t, p, 1); return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	proc := <-procs
	defer proc.ln.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go io.Copy(io.Discard, outR)
	go r.Run(context.Background(), inR, outW)
	c := <-proc.conns
	long := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":"` + strings.Repeat("a", 3<<20) + `"}}` + "\n"
	half := len(long) / 2
	seen := make(chan struct{})
	go func() {
		inW.Write([]byte(long[:half]))
		// The session holds no more than its bound of it: the process
		// has its start before the agent wrote its end.
		<-seen
		inW.Write([]byte(long[half:]))
		inW.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"))
	}()
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := make([]byte, 200<<10)
	if _, err := io.ReadFull(c.rd, start); err != nil {
		t.Fatalf("the process got nothing of a line the agent has not ended: %v", err)
	}
	close(seen)
	rest, err := c.rd.ReadString('\n')
	got := string(start) + rest
	if err != nil || got != long {
		t.Fatalf("the process read %d bytes (%v), want the %d of the long line", len(got), err, len(long))
	}
	if m := c.line(t); m["method"] != "ping" {
		t.Fatalf("after the long line: %v", m)
	}
	inW.Close()
}

// An agent that never answers the requests sent to it (roots/list, say)
// does not make the session's memory of them grow without end.
func TestRequestsTheAgentNeverAnswersAreForgottenPastABound(t *testing.T) {
	p := testPlace(t)
	procs := make(chan *fakeProcess, 1)
	r, err := Connect(Options{Place: p, Spawn: func() (<-chan struct{}, error) { procs <- startFake(t, p, 1); return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	proc := <-procs
	defer proc.ln.Close()
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	go r.Run(context.Background(), inR, outW)
	c := <-proc.conns
	agent := bufio.NewReader(outR)
	n := 3 * maxAsked
	go func() {
		for i := range n {
			c.send(t, `{"jsonrpc":"2.0","id":"ask-`+strconv.Itoa(i)+`","method":"roots/list"}`)
		}
	}()
	for range n {
		if _, err := agent.ReadBytes('\n'); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	held := len(r.asked)
	r.mu.Unlock()
	if held > maxAsked {
		t.Errorf("the session remembers %d unanswered requests to the agent, want at most %d", held, maxAsked)
	}
}
