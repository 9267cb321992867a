package mux

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// rawAgent is an agent that writes and reads JSON-RPC lines itself: what
// it reads is exactly what mux wrote.
type rawAgent struct {
	t    testing.TB
	in   *io.PipeWriter
	out  *bufio.Reader
	seen [][]byte // every line read, in order
}

func newRawAgent(t testing.TB, m *Mux) *rawAgent {
	t.Helper()
	a := rawAgentOn(t, m)
	a.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	a.response(`"init"`)
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return a
}

// rawAgentOn connects a rawAgent to m that has sent nothing yet.
func rawAgentOn(t testing.TB, m *Mux) *rawAgent {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	if _, err := m.Connect(context.Background(), door.Stdio(inR, outW, door.StdioOptions{Drain: time.Second})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
	})
	return &rawAgent{t: t, in: inW, out: bufio.NewReaderSize(outR, 1<<20)}
}

func (a *rawAgent) send(line string) {
	a.t.Helper()
	if _, err := io.WriteString(a.in, line+"\n"); err != nil {
		a.t.Fatalf("writing to mux: %v", err)
	}
}

// response reads lines until the response with id (as JSON) and returns
// it; notifications on the way are skipped.
func (a *rawAgent) response(id string) []byte {
	a.t.Helper()
	done := make(chan []byte, 1)
	go func() {
		for {
			line, err := a.out.ReadBytes('\n')
			if err != nil {
				done <- nil
				return
			}
			a.seen = append(a.seen, line)
			if bytes.Contains(line, []byte(`"id":`+id+`,`)) && !bytes.Contains(line, []byte(`"method":`)) {
				done <- line
				return
			}
		}
	}()
	select {
	case line := <-done:
		if line == nil {
			a.t.Fatalf("mux's stdout ended before the response to %s", id)
		}
		return line
	case <-time.After(10 * time.Second):
		a.t.Fatalf("no response to %s within 10s", id)
		return nil
	}
}

// call sends a request and returns its response line.
func (a *rawAgent) call(id int, method, params string) []byte {
	a.t.Helper()
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	return a.response(fmt.Sprint(id))
}

// toolText is the text of a tools/call response line's result.
func toolText(t testing.TB, line []byte) string {
	t.Helper()
	var r struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &r); err != nil || len(r.Result.Content) == 0 {
		t.Fatalf("not a tool result: %s (%v)", line, err)
	}
	return r.Result.Content[0].Text
}

// A tool result reaches the agent as the backend wrote it: numbers the
// go-sdk's types would have turned into float64 (and so rounded) keep
// every digit, and 1.10 stays 1.10, for a client of either era. Before,
// the typed round trip sent 12345678901234567000 and 1.1 (in the current
// era until its requests passed through too).
func TestToolResultReachesTheAgentAsTheBackendSentIt(t *testing.T) {
	for _, era := range []struct {
		name string
		call func(a *rawAgent, id int, method, params string) []byte
		new  func(testing.TB, *Mux) *rawAgent
	}{
		{"handshake era", (*rawAgent).call, newRawAgent},
		{"current era", func(a *rawAgent, id int, method, params string) []byte { return a.modernCall(id, method, params) }, newModernRawAgent},
	} {
		t.Run(era.name, func(t *testing.T) {
			m := startMux(t, fixture(t, "notes", "-structured-echo"))
			a := era.new(t, m)
			era.call(a, 1, "tools/list", `{}`)
			got := era.call(a, 2, "tools/call", `{"name":"notes__echo","arguments":{"big":12345678901234567891,"f":1.10}}`)
			if want := `"structuredContent":{"big":12345678901234567891,"f":1.10}`; !strings.Contains(string(got), want) {
				t.Errorf("tools/call result:\n%s\nwant it to contain %s", got, want)
			}
		})
	}
}

// A request passed through as bytes is cancelled as one the go-sdk
// handles: the agent gets no response, the backend gets
// notifications/cancelled with the agent's reason.
func TestPassedThroughRequestIsCancelledWithTheAgentsReason(t *testing.T) {
	for _, era := range []struct {
		name  string
		agent func(testing.TB, *Mux) *rawAgent
		meta  string // what every request's params carry besides
	}{
		{"handshake era", newRawAgent, ""},
		{"current era", newModernRawAgent, modernMeta},
	} {
		t.Run(era.name, func(t *testing.T) {
			params := func(p string) string {
				if era.meta == "" {
					return p
				}
				if p == "{}" {
					return "{" + era.meta + "}"
				}
				return strings.TrimSuffix(p, "}") + "," + era.meta + "}"
			}
			m := startMux(t, fixture(t, "notes"))
			a := era.agent(t, m)
			a.call(1, "tools/list", params(`{}`))
			statsID := 100
			called := testkit.Arrived(func() int {
				statsID++
				return testkit.Requests(toolText(t, a.call(statsID, "tools/call", params(`{"name":"notes__stats","arguments":{}}`))))
			})
			a.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":` + params(`{"name":"notes__sleep","arguments":{"ms":10000}}`) + `}`)
			testkit.Eventually(t, 5*time.Second, "the call to be at the backend", called)
			a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"the user pressed stop"}}`)
			var got []byte
			testkit.Poll(5*time.Second, func() bool {
				got = a.call(3, "tools/call", params(`{"name":"notes__stats","arguments":{}}`))
				return strings.Contains(string(got), `the user pressed stop`)
			})
			if !strings.Contains(string(got), `\"cancel_reasons\":[\"the user pressed stop\"]`) {
				t.Errorf("the backend's stats: %s\nwant the agent's reason", got)
			}
			a.call(4, "ping", `{}`)
			for _, line := range a.seen {
				if bytes.Contains(line, []byte(`"id":2,`)) {
					t.Errorf("the cancelled request got a response: %s", line)
				}
			}
		})
	}
}

// resources/updated skips the go-sdk's notification queue (the reader of
// the backend's stdout hands it to mux itself), yet the agent gets a
// backend's notifications in the order it sent them: each update waits
// for the log messages read before it.
func TestUpdatesKeepTheirPlaceAmongTheBackendsOtherNotifications(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	a := newRawAgent(t, m)
	a.call(1, "tools/list", `{}`)
	const uri = "fixture://notes/res/1"
	a.call(2, "resources/subscribe", fmt.Sprintf(`{"uri":%q}`, uri))
	a.call(3, "logging/setLevel", `{"level":"debug"}`)
	const n = 200
	var lines []string
	for i := range n {
		lines = append(lines,
			fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"m%d"}}`, i),
			fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":%q,"_meta":{"n":"u%d"}}}`, uri, i))
	}
	text, _ := json.Marshal(strings.Join(lines, "\n"))
	a.seen = nil
	a.call(4, "tools/call", fmt.Sprintf(`{"name":"notes__noise","arguments":{"text":%s}}`, text))
	var order []string
	deadline := time.Now().Add(10 * time.Second)
	for len(order) < 2*n && time.Now().Before(deadline) {
		order = order[:0]
		for _, line := range a.seen {
			if i := bytes.Index(line, []byte(`"data":"m`)); i >= 0 {
				order = append(order, string(line[i+8:i+8+bytes.IndexByte(line[i+8:], '"')]))
			} else if i := bytes.Index(line, []byte(`"n":"u`)); i >= 0 {
				order = append(order, string(line[i+5:i+5+bytes.IndexByte(line[i+5:], '"')]))
			}
		}
		if len(order) < 2*n {
			a.call(5, "ping", `{}`) // reads on: what came meanwhile lands in a.seen
		}
	}
	if len(order) != 2*n {
		t.Fatalf("got %d of %d notifications", len(order), 2*n)
	}
	for i := range n {
		if order[2*i] != fmt.Sprintf("m%d", i) || order[2*i+1] != fmt.Sprintf("u%d", i) {
			t.Fatalf("notifications out of order at %d: %v", 2*i, order[max(0, 2*i-4):min(len(order), 2*i+6)])
		}
	}
}

// An id already in flight is refused with -32600, as the go-sdk refuses
// one among the requests it handles: mux forwards some requests itself,
// and must not send a backend (and answer) two requests under one id.
// Before, both went to the backend and the agent got two results for 7.
func TestRequestIDInUseIsRefused(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	a := newRawAgent(t, m)
	a.call(1, "tools/list", `{}`)
	a.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"notes__sleep","arguments":{"ms":300}}}`)
	a.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"notes__echo","arguments":{"x":1}}}`)
	first := a.response("7")
	second := a.response("7")
	a.call(8, "ping", `{}`)
	var got []string
	for _, line := range [][]byte{first, second} {
		got = append(got, string(line))
	}
	for _, line := range a.seen {
		if bytes.Contains(line, []byte(`"id":7,`)) && !bytes.Equal(line, first) && !bytes.Equal(line, second) {
			got = append(got, string(line))
		}
	}
	if len(got) != 2 || !strings.Contains(got[0], `"code":-32600`) || !strings.Contains(got[1], `slept`) {
		t.Errorf("responses to id 7:\n%s\nwant -32600 for the second, then the first's result", strings.Join(got, ""))
	}
}

// An agent that writes a request and closes stdin still gets the answer to
// a request passed through as bytes before the session ends, as it does
// for one the go-sdk handles.
func TestPassedThroughRequestIsAnsweredAfterStdinEnds(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	a := newRawAgent(t, m)
	a.call(1, "tools/list", `{}`)
	a.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notes__sleep","arguments":{"ms":300}}}`)
	a.in.Close()
	got := a.response("2")
	if !strings.Contains(string(got), "slept") {
		t.Errorf("response after stdin's EOF: %s", got)
	}
}

// TestJSONStringAndQuoteAgreeWithEncodingJSON: the pass-through's own
// string decoding and encoding (a tool's name, without encoding/json when
// there is nothing to escape) give what encoding/json gives, for names
// with and without anything to escape.
func TestJSONStringAndQuoteAgreeWithEncodingJSON(t *testing.T) {
	names := []string{"", "echo", "fx__echo", "a b", `quo"te`, `back\slash`, "tab\there", "<html>&", "naïve", "emoji 🎉",
		"\x7f", "line\u2028sep", "nul\x00", "\xff\xfe", "ctrl\x1f"}
	for i := range 200 {
		b := make([]byte, i%12)
		for j := range b {
			b[j] = byte((i*31 + j*17) % 256)
		}
		names = append(names, string(b))
	}
	for _, name := range names {
		want, err := json.Marshal(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := quoteJSON(name); string(got) != string(want) {
			t.Errorf("quoteJSON(%q) = %s, encoding/json gives %s", name, got, want)
		}
		var wantS string
		if err := json.Unmarshal(want, &wantS); err != nil {
			t.Fatal(err)
		}
		for _, raw := range []string{string(want), " " + string(want) + "\n", `"` + name + `"`} {
			var s string
			wantErr := json.Unmarshal([]byte(raw), &s)
			got, ok := jsonString(json.RawMessage(raw))
			if wantErr != nil {
				continue // not valid JSON: a message that decoded never has it
			}
			if !ok || got != s {
				t.Errorf("jsonString(%q) = %q, %v; encoding/json gives %q", raw, got, ok, s)
			}
		}
	}
}

// The agent's reader writes requests to their backend itself
// (passThrough.sendNow), and never waits on it: what a pipe does not take
// at once goes from a goroutine (Backend.SendLines). A backend that
// stopped reading, its pipe full, holds up none of the agent's requests
// to other backends.
func TestABackendThatStopsReadingHoldsUpNoOtherBackend(t *testing.T) {
	m := startMux(t, fixture(t, "deaf", "-deaf-tool"), fixture(t, "ok"))
	a := newRawAgent(t, m)
	a.call(1, "tools/list", `{}`)
	if got := toolText(t, a.call(2, "tools/call", `{"name":"deaf__deaf","arguments":{}}`)); got != "deaf" {
		t.Fatalf("deaf__deaf: %q", got)
	}
	// Lines small enough to go whole into a pipe with room (3 KiB), and
	// enough of them to fill it several times over, then one to the other
	// backend. (From a goroutine: the agent's pipe takes a line only once
	// mux reads it.)
	arg := strings.Repeat("x", 3<<10)
	lines := make(chan string, 101)
	for i := range 100 {
		lines <- fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"deaf__echo","arguments":{"text":%q}}}`, 100+i, arg)
	}
	lines <- `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ok__echo","arguments":{"text":"hi"}}}`
	close(lines)
	go func() {
		for line := range lines {
			if _, err := io.WriteString(a.in, line+"\n"); err != nil {
				return // the test is over
			}
		}
	}()
	if got := toolText(t, a.response("3")); !strings.Contains(got, "hi") {
		t.Errorf("ok__echo: %q", got)
	}
}
