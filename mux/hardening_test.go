package mux

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Regression tests for what a misbehaving backend could do to mcp-mux: each
// input here crashed it, tore a connection or misrouted before the fix.

// noise makes the fixture write line raw on its stdout, as a buggy or
// hostile backend would.
func noise(t testing.TB, cs *mcp.ClientSession, tool, line string) {
	t.Helper()
	callText(t, cs, tool, map[string]any{"text": line})
}

func TestNotificationsWithNullOrAbsentParamsAreDropped(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	u := newUpdates()
	cs := connect(t, m, u.opts())
	subscribe(t, cs, res1)
	pid := fixtureStats(t, cs, "notes__stats").PID
	for _, line := range []string{
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":null}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated"}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":5}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":null}`,
		`{"jsonrpc":"2.0","method":"notifications/progress"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":null}`,
		`{"jsonrpc":"2.0","method":"notifications/message"}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":null}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":5}`,
	} {
		noise(t, cs, "notes__noise", line)
	}
	// mux is still up, the same backend still serves, and a real update
	// still reaches the subscriber.
	callText(t, cs, "notes__update", map[string]any{"uri": res1})
	u.waitFor(t, res1, 1)
	if got := fixtureStats(t, cs, "notes__stats").PID; got != pid {
		t.Errorf("backend was restarted (pid %d → %d)", pid, got)
	}
	if got := u.uris(); !slices.Equal(got, []string{res1}) {
		t.Errorf("the agent got updates %q, want only the real one", got)
	}
}

func TestNullEntriesInListResultsAreSkipped(t *testing.T) {
	m := startMux(t, fixture(t, "bad", "-null-entries", "-prompts", "plan"), fixture(t, "good"))
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)

	if got := toolNames(t, cs); !slices.Contains(got, "bad__echo") || !slices.Contains(got, "good__echo") {
		t.Errorf("tools = %v, want both backends' tools", got)
	}
	var prompts []string
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p.Name)
	}
	if want := []string{"bad__greet", "bad__plan", "good__greet"}; !slices.Equal(prompts, want) {
		t.Errorf("prompts = %v, want %v", prompts, want)
	}
	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for next := res; ; {
		for _, r := range next.Resources {
			if r == nil {
				t.Fatal("the agent got a null resource")
			}
			uris = append(uris, r.URI)
		}
		if next.NextCursor == "" {
			break
		}
		if next, err = cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: next.NextCursor}); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(uris, "fixture://bad/res/1") || !slices.Contains(uris, "fixture://good/res/1") {
		t.Errorf("resources = %v, want both backends' resources", uris)
	}
	var tmpls []string
	for rt, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tmpls = append(tmpls, rt.URITemplate)
	}
	if want := []string{"fixture://bad/items/{id}", "fixture://good/items/{id}"}; !slices.Equal(tmpls, want) {
		t.Errorf("templates = %v, want %v", tmpls, want)
	}
	if got := callText(t, cs, "bad__echo", map[string]any{"x": 1}); got != `{"x":1}` {
		t.Errorf("bad__echo = %q", got)
	}
}

// A later backend that lists a URI exactly must not take it from an
// earlier backend whose template matches it: config order decides every
// kind of match, or backend B could hijack A's subscriptions and spoof
// its updates.
func TestEarlierBackendOwnsURIItsTemplateMatches(t *testing.T) {
	const hijacked = "fixture://a/items/7"
	m := startMux(t, fixture(t, "a"), fixture(t, "b", "-list-uris", hijacked))
	u := newUpdates()
	cs := connect(t, m, u.opts())

	res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: hijacked})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Contents[0].Text; got != "a item 7" {
		t.Errorf("read %s = %q, want a's answer", hijacked, got)
	}
	subscribe(t, cs, hijacked)
	if got := fixtureStats(t, cs, "a__stats").Subscribe[hijacked]; got != 1 {
		t.Errorf("a received %d subscribes, want 1", got)
	}
	if got := fixtureStats(t, cs, "b__stats").Subscribe[hijacked]; got != 0 {
		t.Errorf("b received %d subscribes, want 0", got)
	}
	callText(t, cs, "b__update", map[string]any{"uri": hijacked}) // spoofed
	callText(t, cs, "a__update", map[string]any{"uri": hijacked})
	u.waitFor(t, hijacked, 1)
	u.quiet(t, 200*time.Millisecond)
	if n := u.count(hijacked); n != 1 {
		t.Errorf("the agent got %d updates, want 1 (b's must not be delivered)", n)
	}
	// The agent is not shown b's entry for a URI that reads from a.
	for r, err := range cs.Resources(testkit.CtxT(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if r.URI == hijacked {
			t.Errorf("resources/list shows %s, which b lists but a owns", hijacked)
		}
	}
	// check --connect names both backends.
	var found bool
	for _, c := range m.Collisions() {
		if c.Kind == "resource" && c.Name == hijacked && c.Winner == "a" && c.Loser == "b" {
			found = true
		}
	}
	if !found {
		t.Errorf("collisions %+v lack %s (a's template over b's listing)", m.Collisions(), hijacked)
	}
}

func TestOverlappingTemplatesAreReported(t *testing.T) {
	m := startMux(t, fixture(t, "a", "-uri-base", "shared://x/"), fixture(t, "b", "-uri-base", "shared://x/"))
	cs := connect(t, m, nil)
	toolNames(t, cs) // wait for both
	var found bool
	for _, c := range m.Collisions() {
		if c.Kind == "template" && c.Winner == "a" && c.Loser == "b" && strings.Contains(c.Name, "shared://x/items/{id}") {
			found = true
		}
	}
	if !found {
		t.Errorf("collisions %+v lack the overlapping templates", m.Collisions())
	}
}

func TestBackendCannotServeMuxOwnScheme(t *testing.T) {
	m := startMux(t, fixture(t, "evil", "-list-uris", "mcp-mux://backends,mcp-mux://evil,MCP-MUX://subscriptions"))
	cs := connect(t, m, nil)
	var uris []string
	for r, err := range cs.Resources(testkit.CtxT(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	for _, u := range uris {
		if strings.HasPrefix(strings.ToLower(u), "mcp-mux:") && !isBuiltin(u) {
			t.Errorf("resources/list shows the backend's %s", u)
		}
	}
	if n := countOf(uris, uriBackends); n != 1 {
		t.Errorf("%s listed %d times, want once", uriBackends, n)
	}
	_, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: "mcp-mux://evil"})
	if je := rpcCode(t, err); je.Code != CodeResourceNotFound {
		t.Errorf("read mcp-mux://evil: code %d, want %d", je.Code, CodeResourceNotFound)
	}
	res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: uriBackends})
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Backends []BackendStatus }
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &v); err != nil || len(v.Backends) != 1 {
		t.Errorf("read %s did not come from mux: %q", uriBackends, res.Contents[0].Text)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func TestOverlongUpdatedURIIsDroppedAndSubscribeStaysFast(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	u := newUpdates()
	cs := connect(t, m, u.opts())
	subscribe(t, cs, res1)
	long := res1 + "/" + strings.Repeat("/", 200_000)
	callText(t, cs, "notes__update", map[string]any{"uri": long, "count": 3})
	subscribe(t, cs, "fixture://notes/res/2") // answered while the flood is handled
	callText(t, cs, "notes__update", map[string]any{"uri": res1})
	u.waitFor(t, res1, 1)
	u.quiet(t, 100*time.Millisecond)
	for _, got := range u.uris() {
		if got != res1 {
			t.Errorf("the agent got an update for a %d-byte URI", len(got))
		}
	}
	err := cs.Subscribe(testkit.CtxT(t), &mcp.SubscribeParams{URI: long})
	if je := rpcCode(t, err); je.Code != -32602 {
		t.Errorf("subscribe to an overlong URI: code %d, want -32602", je.Code)
	}
}

// A notification the go-sdk drops undecoded (params of the wrong type)
// never reaches a handler; a response waits for the notifications before
// it (at most 100 ms), and must not wait for that one ever again.
func TestUndecodableNotificationDoesNotSlowLaterResponses(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs := connect(t, m, nil)
	noise(t, cs, "notes__noise", `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":5}}`)
	start := time.Now()
	for range 10 {
		callText(t, cs, "notes__echo", nil)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("10 calls after an undecodable notification took %v: each waited for it", d)
	}
}
