package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// End-to-end tests of the agent's side over raw pipes: what an agent that
// stops reading, sends garbage or goes away mid-request does to mcp-mux.

// wire is mcp-mux run with raw pipes: the test writes lines and reads
// them when it chooses to (not reading is how an agent stalls).
type wire struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser // under out: closing it is the agent closing its end
	out    *bufio.Reader
	stderr *testkit.SyncBuffer
	exited chan struct{}
	err    error
}

func startWire(t *testing.T, config string) *wire {
	t.Helper()
	return startWireCmd(t, testkit.MuxBin(t), "--config", config)
}

// startWireCmd runs any stdio MCP server with raw pipes (a backend alone,
// to compare with what mcp-mux makes of it).
func startWireCmd(t *testing.T, name string, args ...string) *wire {
	t.Helper()
	return startWireExec(t, exec.Command(name, args...))
}

// startWireExec starts cmd with raw pipes.
func startWireExec(t *testing.T, cmd *exec.Cmd) *wire {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{t: t, cmd: cmd, stdin: stdin, stdout: stdout, out: bufio.NewReaderSize(stdout, 1<<20), stderr: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-w.exited
	})
	return w
}

func (w *wire) send(lines ...string) {
	w.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(w.stdin, l+"\n"); err != nil {
			w.t.Fatalf("writing %q: %v", l, err)
		}
	}
}

type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		URI string `json:"uri"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// next reads one message; ok is false at EOF.
func (w *wire) next() (wireMsg, bool) {
	w.t.Helper()
	line, err := w.out.ReadBytes('\n')
	if err != nil {
		return wireMsg{}, false
	}
	var m wireMsg
	if err := json.Unmarshal(line, &m); err != nil {
		w.t.Fatalf("stdout line is not JSON-RPC: %q", line)
	}
	return m, true
}

// response reads until the response with id, skipping notifications.
func (w *wire) response(id int) wireMsg {
	w.t.Helper()
	for {
		m, ok := w.next()
		if !ok {
			w.t.Fatalf("stdout ended before the response to %d\nstderr:\n%s", id, w.stderr)
		}
		if string(m.ID) == strconv.Itoa(id) && m.Method == "" {
			return m
		}
	}
}

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
const initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

func (w *wire) initialize() {
	w.t.Helper()
	w.send(initLine)
	if m := w.response(1); m.Error != nil {
		w.t.Fatalf("initialize: %+v", m.Error)
	}
	w.send(initializedLine)
}

// toolText calls tool (no arguments) in a request with id and returns the
// text of its result.
func (w *wire) toolText(id int, tool string) string {
	w.t.Helper()
	w.send(call(id, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":{}}`, tool)))
	m := w.response(id)
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || len(res.Content) == 0 {
		w.t.Fatalf("%s: %s %+v", tool, m.Result, m.Error)
	}
	return res.Content[0].Text
}

func call(id int, method, params string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

func TestStdinEOFAnswersRequestsAlreadyRead(t *testing.T) {
	w := startWire(t, testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"}))
	w.send(initLine, initializedLine,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		call(3, "tools/call", `{"name":"notes__sleep","arguments":{"ms":300}}`))
	w.stdin.Close()
	got := map[string]bool{}
	for {
		m, ok := w.next()
		if !ok {
			break
		}
		if m.Method == "" {
			got[string(m.ID)] = m.Error == nil
		}
	}
	for _, id := range []string{"1", "2", "3"} {
		if !got[id] {
			t.Errorf("no successful response to id %s before exit (got %v)\nstderr:\n%s", id, got, w.stderr)
		}
	}
	<-w.exited
}

// Error code 0 must never reach the agent: the go-sdk answers some of its
// own checks with code 0 (a second initialize, params of the wrong type).
func TestErrorCodeIsNeverZero(t *testing.T) {
	w := startWire(t, testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"}))
	w.send(call(1, "initialize", `{"protocolVersion":5,"capabilities":[],"clientInfo":"x"}`))
	if m := w.response(1); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("initialize with wrongly typed params: %+v, want -32602", m.Error)
	}
	w.initialize()
	w.send(strings.Replace(initLine, `"id":1`, `"id":2`, 1))
	if m := w.response(2); m.Error == nil || m.Error.Code != -32600 {
		t.Errorf("second initialize: %+v, want -32600", m.Error)
	}

	// Every method the mux serves, with params of every wrong shape.
	methods := []string{"initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get",
		"resources/list", "resources/read", "resources/templates/list", "resources/subscribe",
		"resources/unsubscribe", "logging/setLevel", "completion/complete", "server/discover", "no/such"}
	params := []string{"", `,"params":null`, `,"params":5`, `,"params":"s"`, `,"params":[]`, `,"params":[1]`,
		`,"params":{}`, `,"params":{"name":5}`, `,"params":{"name":"notes__echo","arguments":5}`,
		`,"params":{"name":"notes__echo","arguments":[]}`, `,"params":{"uri":[]}`, `,"params":{"uri":""}`,
		`,"params":{"cursor":5}`, `,"params":{"cursor":"!!"}`, `,"params":{"level":"nope"}`, `,"params":{"ref":5}`,
		`,"params":{"ref":{"type":"ref/x"}}`, `,"params":{"_meta":5}`, `,"params":{"_meta":{"progressToken":{}}}`,
		`,"params":{"name":"notes__greet","arguments":{"name":5}}`, `,"params":{"uri":"nope://x","x":1}`,
	}
	id := 10
	sent := 0
	for _, m := range methods {
		for _, p := range params {
			id++
			w.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q%s}`, id, m, p))
			sent++
		}
	}
	// And malformed frames of every kind.
	frames := []string{`{"jsonrpc":"2.0","id":{},"method":"ping"}`, `{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"ping"}`, `{"jsonrpc":"2.0","method":5,"id":7}`, `{"jsonrpc":"2.0"}`,
		`{"JSONRPC":"2.0","id":8,"method":"ping"}`, `{"jsonrpc":2,"id":9,"method":"ping"}`, `[]`, `[{}]`, `{}`, `null`,
		`"x"`, `{"jsonrpc":"2.0","id":null,"method":"ping"}`, strings.Repeat("[", 2000) + strings.Repeat("]", 2000),
		`{"jsonrpc":"2.0","id":1e999,"method":"ping"}`, `{"jsonrpc":"2.0","id":-1,"method":"ping","params":{"_meta":[]}}`}
	w.send(frames...)
	w.send(`{"jsonrpc":"2.0","id":9999,"method":"ping"}`)
	answered := 0
	for {
		m, ok := w.next()
		if !ok {
			t.Fatalf("stdout ended\nstderr:\n%s", w.stderr)
		}
		if m.Method != "" {
			continue
		}
		answered++
		if m.Error != nil && m.Error.Code == 0 {
			t.Errorf("code 0 for id %s: %s", m.ID, m.Error.Message)
		}
		if string(m.ID) == "9999" {
			break
		}
	}
	t.Logf("%d requests and %d malformed frames: %d answers, none with code 0", sent, len(frames), answered)
}

// floodConfig is one backend that can flood notifications, with three
// listed resources.
func floodConfig(t *testing.T) string {
	return testkit.WriteConfig(t, "", []string{"notes", "-name", "notes", "-resources", "3"})
}

// stall subscribes to the three resources, asks the backend for count
// updates of each, and does not read stdout while they arrive.
func (w *wire) stall(count int) {
	w.t.Helper()
	w.initialize()
	for i := 1; i <= 3; i++ {
		w.send(call(10+i, "resources/subscribe", fmt.Sprintf(`{"uri":"fixture://notes/res/%d"}`, i)))
		if m := w.response(10 + i); m.Error != nil {
			w.t.Fatalf("subscribe: %+v", m.Error)
		}
	}
	for i := 1; i <= 3; i++ {
		w.send(call(20+i, "tools/call", fmt.Sprintf(`{"name":"notes__update","arguments":{"uri":"fixture://notes/res/%d","count":%d}}`, i, count)))
	}
}

// An agent that stops reading stdout while a backend floods notifications
// must not make mcp-mux's memory grow: queued updates are coalesced per
// URI, responses are kept, and once the agent reads again it learns of
// every URI that changed.
func TestSlowAgentKeepsMemoryBounded(t *testing.T) {
	w := startWire(t, floodConfig(t))
	w.stall(40_000)
	// The backend floods; nobody reads. Its log (in mcp-mux's) tells when
	// it has sent the whole flood: mcp-mux has read all of it then but
	// what the pipe still holds (64 KiB, a few hundred updates).
	began := time.Now()
	testkit.Eventually(t, 60*time.Second, "the backend to have sent 3 × 40,000 updates", func() bool {
		return strings.Count(w.stderr.String(), "sent 40000 updates for fixture://notes/res/") == 3
	})
	peak := peakRSS(t, w.cmd.Process.Pid)
	t.Logf("peak RSS of mcp-mux after a flood of 3 × 40,000 updates to a stalled agent (%v): %.1f MB", time.Since(began).Round(time.Millisecond), float64(peak)/1e6)
	if peak > 100<<20 {
		t.Errorf("peak RSS %d MB, want under 100 MB", peak>>20)
	}
	// Reading again: every call is answered and every URI was updated.
	updated := w.readStalled(t)
	t.Logf("updates delivered after coalescing: %v", updated)
	w.stdin.Close()
	<-w.exited
}

// Shutdown must not wait for an agent that does not read: after SIGTERM or
// stdin EOF mcp-mux exits within shutdown_grace + 1 s, every child gone.
func TestShutdownWithBlockedStdout(t *testing.T) {
	if runtime.GOOS != "linux" {
		// Before anything starts: a shared process would hold the
		// test's directories, which Windows cannot then remove.
		t.Skip("needs Linux, to see how full a pipe is")
	}
	for _, shared := range []bool{false, true} {
		for _, how := range []string{"SIGTERM", "stdin EOF"} {
			name := how
			if shared {
				name += ", shared"
			}
			t.Run(name, func(t *testing.T) {
				if shared {
					sharedDirs(t)
				}
				shutdownWithBlockedStdout(t, how)
			})
		}
	}
}

// shutdownWithBlockedStdout ends an mcp-mux whose agent stopped reading
// its stdout, by how, and checks it and its processes go in time.
func shutdownWithBlockedStdout(t *testing.T, how string) {
	w := startWire(t, floodConfig(t))
	w.stall(1_000_000)
	waitPipeFull(t, w.stdout) // mcp-mux's writes to stdout block
	kids := descendantsOf(w.cmd.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("no backend running")
	}
	start := time.Now()
	if how == "SIGTERM" {
		signalProcess(t, w.cmd.Process, syscall.SIGTERM)
	} else {
		w.stdin.Close()
	}
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("mcp-mux still running 10 s after %s with stdout blocked", how)
	}
	d := time.Since(start)
	t.Logf("exited %v after %s with stdout blocked (shutdown_grace 1s)", d.Round(time.Millisecond), how)
	if d > 2*time.Second {
		t.Errorf("took %v to exit, want within shutdown_grace + 1 s", d)
	}
	waitGone(t, kids, time.Second)
}

// A request the agent cancels gets no response (MCP: the receiver should
// not answer it), and the backend is told the agent's reason.
func TestCancelledRequestGetsNoResponseAndBackendGetsTheReason(t *testing.T) {
	w := startWire(t, testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"}))
	w.initialize()
	statsID := 100
	called := testkit.Arrived(func() int {
		statsID++
		return testkit.Requests(w.toolText(statsID, "notes__stats"))
	})
	w.send(call(5, "tools/call", `{"name":"notes__sleep","arguments":{"ms":5000}}`))
	testkit.Eventually(t, 5*time.Second, "the call to be at the backend", called)
	w.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"the user pressed stop"}}`)
	testkit.Quiet(300 * time.Millisecond) // a response to the cancelled call must not come
	w.send(call(6, "tools/call", `{"name":"notes__stats","arguments":{}}`))
	for {
		m, ok := w.next()
		if !ok {
			t.Fatalf("stdout ended\nstderr:\n%s", w.stderr)
		}
		if m.Method != "" {
			continue
		}
		if string(m.ID) == "5" {
			t.Errorf("the cancelled request got a response: %s", m.Result)
			continue
		}
		if string(m.ID) != "6" {
			continue
		}
		var res struct {
			Content []struct{ Text string } `json:"content"`
		}
		json.Unmarshal(m.Result, &res)
		var st struct {
			Cancelled     int      `json:"cancelled"`
			CancelReasons []string `json:"cancel_reasons"`
		}
		if len(res.Content) == 0 || json.Unmarshal([]byte(res.Content[0].Text), &st) != nil {
			t.Fatalf("stats: %s", m.Result)
		}
		if st.Cancelled != 1 || len(st.CancelReasons) != 1 || st.CancelReasons[0] != "the user pressed stop" {
			t.Errorf("the backend saw %d cancellations with reasons %q, want 1 with the agent's\n%s", st.Cancelled, st.CancelReasons, w.stderr)
		}
		break
	}
}

// rawResult sends one request and returns its result as generic JSON.
func (w *wire) rawResult(id int, method, params string) map[string]any {
	w.t.Helper()
	w.send(call(id, method, params))
	m := w.response(id)
	if m.Error != nil {
		w.t.Fatalf("%s: %+v", method, m.Error)
	}
	var v map[string]any
	if err := json.Unmarshal(m.Result, &v); err != nil {
		w.t.Fatal(err)
	}
	return v
}

// byName indexes a list result's items by a field, with a prefix cut off.
func byName(t *testing.T, list any, field, prefix string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	items, _ := list.([]any)
	for _, it := range items {
		m := it.(map[string]any)
		name, _ := m[field].(string)
		if n, ok := strings.CutPrefix(name, prefix); ok {
			m[field] = n
			out[n] = m
		}
	}
	return out
}

// What a backend lists reaches the agent whole: every field of its tools,
// prompts and templates (title, icons, annotations, outputSchema, _meta…),
// compared on the wire with the backend alone, apart from the prefix; and
// so do a tool's structured result and a completion's total and hasMore.
func TestListedItemsReachTheAgentFieldForField(t *testing.T) {
	bare := startWireCmd(t, testkit.FixtureBin(t), "-name", "notes", "-rich")
	bare.initialize()
	mux := startWire(t, testkit.WriteConfig(t, "", []string{"notes", "-name", "notes", "-rich"}))
	mux.initialize()
	for _, l := range []struct{ method, key, field, prefix string }{
		{"tools/list", "tools", "name", "notes__"},
		{"prompts/list", "prompts", "name", "notes__"},
		{"resources/templates/list", "resourceTemplates", "uriTemplate", ""},
		{"resources/list", "resources", "uri", "fixture://"},
	} {
		want := byName(t, bare.rawResult(2, l.method, `{}`)[l.key], l.field, "")
		got := byName(t, mux.rawResult(2, l.method, `{}`)[l.key], l.field, l.prefix)
		if l.prefix == "fixture://" {
			want = byName(t, bare.rawResult(2, l.method, `{}`)[l.key], l.field, "fixture://")
		}
		if len(want) == 0 {
			t.Fatalf("%s: the backend lists nothing", l.method)
		}
		for name, w := range want {
			g, ok := got[name]
			if !ok {
				t.Errorf("%s: %s missing through mcp-mux", l.method, name)
				continue
			}
			for k, wv := range w {
				if gv, ok := g[k]; !ok {
					t.Errorf("%s: %s lost its %q", l.method, name, k)
				} else if a, b := mustJSON(t, wv), mustJSON(t, gv); a != b {
					t.Errorf("%s: %s %q = %s through mcp-mux, %s from the backend", l.method, name, k, b, a)
				}
			}
			for k := range g {
				if _, ok := w[k]; !ok {
					t.Errorf("%s: %s gained %q through mcp-mux", l.method, name, k)
				}
			}
		}
	}
	want := bare.rawResult(3, "tools/call", `{"name":"rich","arguments":{"q":"?"}}`)
	got := mux.rawResult(3, "tools/call", `{"name":"notes__rich","arguments":{"q":"?"}}`)
	if a, b := mustJSON(t, want), mustJSON(t, got); a != b {
		t.Errorf("tools/call result through mcp-mux %s, from the backend %s", b, a)
	}
	params := `{"ref":{"type":"ref/prompt","name":"%s"},"argument":{"name":"name","value":""}}`
	want = bare.rawResult(4, "completion/complete", fmt.Sprintf(params, "greet"))
	got = mux.rawResult(4, "completion/complete", fmt.Sprintf(params, "notes__greet"))
	if a, b := mustJSON(t, want), mustJSON(t, got); a != b {
		t.Errorf("completion through mcp-mux %s, from the backend %s", b, a)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// modernMeta makes a request of the current protocol era (2026-07-28): no
// initialize, the version and capabilities in every request's _meta.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"modern","version":"1"}}`

// rawMsg is any message, generic.
type rawMsg map[string]any

// until reads messages until one satisfies want, returning it.
func (w *wire) until(what string, want func(rawMsg) bool) rawMsg {
	w.t.Helper()
	deadline := time.AfterFunc(10*time.Second, func() { w.cmd.Process.Kill() })
	defer deadline.Stop()
	for {
		line, err := w.out.ReadBytes('\n')
		if err != nil {
			w.t.Fatalf("stdout ended waiting for %s\nstderr:\n%s", what, w.stderr)
		}
		var m rawMsg
		if err := json.Unmarshal(line, &m); err != nil {
			w.t.Fatalf("stdout line is not JSON: %q", line)
		}
		if want(m) {
			return m
		}
	}
}

func isResponse(id float64) func(rawMsg) bool {
	return func(m rawMsg) bool { _, note := m["method"]; return !note && m["id"] == id }
}

func subscriptionID(m rawMsg) any {
	p, _ := m["params"].(map[string]any)
	meta, _ := p["_meta"].(map[string]any)
	return meta["io.modelcontextprotocol/subscriptionId"]
}

// A client of the current era (2026-07-28) gets server/discover, lists and
// calls as a handshake-era client does, and subscriptions/listen: routed
// like resources/subscribe (forwarded, local-only), acknowledged with what
// is honoured, notifications tagged with the stream, list changes only
// because it asked, and cancelling the stream releases its subscriptions
// at the backends.
func TestCurrentEraClient(t *testing.T) {
	w := startWire(t, testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"}, []string{"plain", "-name", "plain", "-subscribe=false"}))
	req := func(id int, method, params string) {
		if params == "" {
			params = "{" + modernMeta + "}"
		} else {
			params = params[:len(params)-1] + "," + modernMeta + "}"
		}
		w.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	}
	result := func(m rawMsg) map[string]any {
		if e, ok := m["error"]; ok {
			t.Fatalf("error: %v", e)
		}
		r, _ := m["result"].(map[string]any)
		return r
	}
	stats := func(id int, backend string) map[string]any {
		req(id, "tools/call", fmt.Sprintf(`{"name":"%s__stats","arguments":{}}`, backend))
		r := result(w.until("stats", isResponse(float64(id))))
		text := r["content"].([]any)[0].(map[string]any)["text"].(string)
		var st map[string]any
		json.Unmarshal([]byte(text), &st)
		return st
	}

	req(1, "server/discover", "")
	d := result(w.until("discover", isResponse(1)))
	if v := fmt.Sprint(d["supportedVersions"]); !strings.Contains(v, "2026-07-28") || !strings.Contains(v, "2025-11-25") {
		t.Errorf("supportedVersions = %v", v)
	}
	if ins, _ := d["instructions"].(string); !strings.Contains(ins, "mcp-mux") {
		t.Errorf("discover instructions = %q", ins)
	}
	req(2, "tools/list", "")
	if tools := fmt.Sprint(result(w.until("tools/list", isResponse(2)))["tools"]); !strings.Contains(tools, "notes__echo") || !strings.Contains(tools, "plain__echo") {
		t.Errorf("tools/list lacks the backends' tools: %.300s", tools)
	}
	req(3, "resources/read", `{"uri":"nope://x"}`)
	if e, _ := w.until("read", isResponse(3))["error"].(map[string]any); e["code"] != float64(-32602) {
		t.Errorf("unknown resource in the current era: %v, want -32602", e)
	}

	req(4, "subscriptions/listen", `{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fixture://notes/res/1","fixture://plain/res/1"]}}`)
	ack := w.until("the acknowledgement", func(m rawMsg) bool { return m["method"] == "notifications/subscriptions/acknowledged" })
	if subscriptionID(ack) != float64(4) {
		t.Errorf("acknowledgement %v not tagged with the listen's id", ack)
	}
	if got := fmt.Sprint(ack["params"]); !strings.Contains(got, "fixture://notes/res/1") || !strings.Contains(got, "fixture://plain/res/1") || !strings.Contains(got, "toolsListChanged:true") {
		t.Errorf("acknowledgement does not list what is honoured: %v", got)
	}
	if st := stats(5, "notes"); fmt.Sprint(st["subscribe"]) != "map[fixture://notes/res/1:1]" {
		t.Errorf("notes was subscribed %v, want res/1 once", st["subscribe"])
	}
	if st := stats(6, "plain"); fmt.Sprint(st["subscribe"]) != "map[]" {
		t.Errorf("plain (no subscribe) was sent %v; its subscription is local-only", st["subscribe"])
	}

	req(7, "tools/call", `{"name":"notes__update","arguments":{"uri":"fixture://notes/res/1"}}`)
	up := w.until("the update", func(m rawMsg) bool { return m["method"] == "notifications/resources/updated" })
	if subscriptionID(up) != float64(4) {
		t.Errorf("update %v not tagged with the listen's id", up)
	}
	req(8, "tools/call", `{"name":"notes__add_tool","arguments":{"name":"fresh"}}`)
	lc := w.until("tools/list_changed", func(m rawMsg) bool { return m["method"] == "notifications/tools/list_changed" })
	if subscriptionID(lc) != float64(4) {
		t.Errorf("list_changed %v not tagged with the listen's id", lc)
	}

	req(9, "subscriptions/listen", `{"notifications":{"resourceSubscriptions":["nope://unknown"]}}`)
	if e, _ := w.until("listen to an unknown URI", isResponse(9))["error"].(map[string]any); e["code"] != float64(-32602) {
		t.Errorf("listen to an unknown URI: %v, want -32602", e)
	}

	// Cancelling the stream releases the backend subscription.
	w.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4,"reason":"done"}}`)
	id := 9
	testkit.Eventually(t, 5*time.Second, "cancelling the listen to unsubscribe the backend", func() bool {
		id++
		return fmt.Sprint(stats(id, "notes")["unsubscribe"]) == "map[fixture://notes/res/1:1]"
	})
}

// subscriptions/listen counts against max_subscriptions like
// resources/subscribe: over it, the listen fails with -32029.
func TestCurrentEraListenHonoursTheSubscriptionLimit(t *testing.T) {
	w := startWire(t, testkit.WriteConfig(t, "max_subscriptions = 1", []string{"notes", "-name", "notes"}))
	w.send(`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fixture://notes/res/1","fixture://notes/res/2"]},` + modernMeta + `}}`)
	start := time.Now()
	m := w.until("the listen's answer", isResponse(1))
	if e, _ := m["error"].(map[string]any); e["code"] != float64(-32029) {
		t.Errorf("a listen over max_subscriptions: %v, want -32029", m)
	}
	// A first request of the current era starts the backends at once (no
	// initialize to wait for); a bound, not a speed target: before, it
	// waited out the 2 s the backends give an agent to initialize.
	if d := time.Since(start); d > time.Second {
		t.Errorf("the first request of the current era took %v", d)
	}
}

// readStalled reads what a stalled agent (stall) was sent, once it reads
// again: every call is answered and every URI was updated. It returns how
// many updates of each URI came.
func (w *wire) readStalled(t *testing.T) map[string]int {
	t.Helper()
	updated := map[string]int{}
	answered := map[string]bool{}
	for len(answered) < 3 {
		m, ok := w.next()
		if !ok {
			t.Fatalf("stdout ended\nstderr:\n%s", w.stderr)
		}
		switch {
		case m.Method == "notifications/resources/updated":
			updated[m.Params.URI]++
		case m.Method == "":
			if m.Error != nil {
				t.Errorf("call %s failed: %+v", m.ID, m.Error)
			}
			answered[string(m.ID)] = true
		}
	}
	for i := 1; i <= 3; i++ {
		if uri := fmt.Sprintf("fixture://notes/res/%d", i); updated[uri] == 0 {
			t.Errorf("no update for %s after the agent read again (got %v)", uri, updated)
		}
	}
	return updated
}
