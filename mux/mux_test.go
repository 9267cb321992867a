package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// controlTools are the fixture's tools besides its echo tools.
var controlTools = []string{"add_resource", "add_tool", "big", "crash", "fail", "hang", "link", "log", "noise", "notify_list_changed", "progress", "set_content", "sleep", "stats", "update"}

func prefixed(prefix string, names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, prefix+"__"+n)
	}
	return out
}

func TestMergeListsOfTwoSubprocessBackends(t *testing.T) {
	m := startMux(t,
		fixture(t, "notes", "-resources", "3", "-tools", "echo"),
		fixture(t, "tasks", "-resources", "2", "-tools", "add,list", "-prompts", "plan"),
	)
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)

	want := append(prefixed("notes", append([]string{"echo"}, controlTools...)...), prefixed("tasks", append([]string{"add", "list"}, controlTools...)...)...)
	got := toolNames(t, cs)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("tools:\n got %v\nwant %v", got, want)
	}

	var prompts []string
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p.Name)
	}
	if want := []string{"notes__greet", "tasks__greet", "tasks__plan"}; !slices.Equal(prompts, want) {
		t.Errorf("prompts = %v, want %v", prompts, want)
	}

	var uris []string
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	wantURIs := []string{"fixture://notes/res/1", "fixture://notes/res/2", "fixture://notes/res/3",
		"fixture://tasks/res/1", "fixture://tasks/res/2",
		uriSubscriptions, uriBackends} // mux's own come last
	if !slices.Equal(uris, wantURIs) {
		t.Errorf("resources:\n got %v\nwant %v", uris, wantURIs)
	}

	var tmpls []string
	for rt, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tmpls = append(tmpls, rt.URITemplate)
	}
	if want := []string{"fixture://notes/items/{id}", "fixture://tasks/items/{id}"}; !slices.Equal(tmpls, want) {
		t.Errorf("templates = %v, want %v", tmpls, want)
	}
}

// A starting backend is asked for its four lists together, not one after
// another: each round trip is a wait before the first full list, and for a
// remote backend a round trip of the network. The fixture answers none of
// them until it has been asked all four.
func TestBackendListsAreAskedTogether(t *testing.T) {
	m := startMux(t, fixture(t, "both", "-resources", "2", "-lists-together"))
	cs := connect(t, m, nil)

	if got := toolNames(t, cs); !slices.Contains(got, "both__echo") {
		t.Errorf("tools = %v, want both__echo among them", got)
	}
	if got, want := promptNames(t, cs), []string{"both__greet"}; !slices.Equal(got, want) {
		t.Errorf("prompts = %v, want %v", got, want)
	}
	if got, want := templateURIs(t, cs), []string{"fixture://both/items/{id}"}; !slices.Equal(got, want) {
		t.Errorf("templates = %v, want %v", got, want)
	}
	// A listed resource reads only if its URI made it into the catalog.
	res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: "fixture://both/res/2"})
	if err != nil || len(res.Contents) != 1 {
		t.Errorf("reading a listed resource: %v, %v", res, err)
	}
}

func TestResourcesPaginateThroughBackendPages(t *testing.T) {
	m := startMux(t,
		fixture(t, "big", "-resources", "100", "-page-size", "10"),
		fixture(t, "small", "-resources", "3"),
	)
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)
	before := fixtureStats(t, cs, "big__stats").ListResources

	seen := map[string]bool{}
	pages, cur := 0, ""
	for {
		res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(res.Resources) > 12 { // one backend page (10) + mux's own 2 on the first
			t.Errorf("page %d has %d items: pages must follow the backend's own", pages, len(res.Resources))
		}
		for _, r := range res.Resources {
			if seen[r.URI] {
				t.Errorf("duplicate %s", r.URI)
			}
			seen[r.URI] = true
		}
		if res.NextCursor == "" {
			break
		}
		cur = res.NextCursor
	}
	if len(seen) != 2+100+3 {
		t.Errorf("got %d resources, want 105", len(seen))
	}
	if pages != 11 {
		t.Errorf("got %d pages, want 11 (10 of big, 1 of small)", pages)
	}
	// Each mux page cost exactly one page request to the big backend.
	if got := fixtureStats(t, cs, "big__stats").ListResources - before; got != 10 {
		t.Errorf("big backend served %d list pages for one pass, want 10", got)
	}
}

func TestInvalidCursorIsInvalidParams(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)
	_, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: "not-a-cursor"})
	if je := rpcCode(t, err); je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("garbage cursor: code %d, want -32602", je.Code)
	}
	// A real cursor of another list is not accepted either.
	toolsCursor := cursor{Kind: "tools", Offset: 1}.encode()
	_, err = cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: toolsCursor})
	if je := rpcCode(t, err); je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("tools cursor on resources: code %d, want -32602", je.Code)
	}
	_, err = cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor{Kind: "tools", Offset: 9999}.encode()})
	if je := rpcCode(t, err); je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("cursor past the end: code %d, want -32602", je.Code)
	}
	_, err = cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor{Kind: "resources", Backend: "nope"}.encode()})
	if je := rpcCode(t, err); je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("cursor naming no backend: code %d, want -32602", je.Code)
	}
}

func TestPrefixedToolAndPromptRouting(t *testing.T) {
	m := startMux(t, fixture(t, "notes", "-tools", "echo"), fixture(t, "tasks", "-tools", "echo"))
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)

	if got := callText(t, cs, "tasks__echo", map[string]any{"x": 1}); got != `{"x":1}` {
		t.Errorf("tasks__echo = %q", got)
	}
	// Routed to the right process: each backend reports its own pid.
	st := m.Status()
	if p := fixtureStats(t, cs, "notes__stats").PID; p != st[0].PID {
		t.Errorf("notes__stats answered by pid %d, want notes' %d", p, st[0].PID)
	}
	if p := fixtureStats(t, cs, "tasks__stats").PID; p != st[1].PID {
		t.Errorf("tasks__stats answered by pid %d, want tasks' %d", p, st[1].PID)
	}

	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "tasks__greet", Arguments: map[string]string{"name": "ann"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Messages[0].Content.(*mcp.TextContent).Text; got != "Hello, ann from tasks" {
		t.Errorf("prompt = %q", got)
	}

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo"})
	if je := rpcCode(t, err); je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, "echo") {
		t.Errorf("unprefixed name: %v", je)
	}
	_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "nobody__greet"})
	if je := rpcCode(t, err); je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown prompt: %v", je)
	}
}

func TestNameCollisionFirstBackendWins(t *testing.T) {
	empty := ""
	a, b := fixture(t, "first"), fixture(t, "second", "-tools", "echo,only_second")
	a.Prefix, b.Prefix = &empty, &empty
	m := startMux(t, a, b)
	cs := connect(t, m, nil)

	names := toolNames(t, cs)
	if n := strings.Count(strings.Join(names, " ")+" ", "stats "); n != 1 {
		t.Errorf("stats listed %d times, want once: %v", n, names)
	}
	if !slices.Contains(names, "only_second") {
		t.Errorf("the loser's other tools must stay: %v", names)
	}
	if p := fixtureStats(t, cs, "stats").PID; p != m.Status()[0].PID {
		t.Errorf("stats answered by pid %d, want the first backend's %d", p, m.Status()[0].PID)
	}
	cols := m.Collisions()
	found := false
	for _, c := range cols {
		if c.Kind == "tool" && c.Name == "stats" && c.Winner == "first" && c.Loser == "second" {
			found = true
		}
	}
	if !found {
		t.Errorf("collision of stats not reported: %+v", cols)
	}
}

func TestReadRouting(t *testing.T) {
	m := startMux(t, fixture(t, "notes"), fixture(t, "tasks"))
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)
	read := func(uri string) (string, error) {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return "", err
		}
		return res.Contents[0].Text, nil
	}

	t.Run("exact", func(t *testing.T) {
		if got, err := read("fixture://tasks/res/2"); err != nil || got != "tasks resource 2" {
			t.Errorf("got %q, %v", got, err)
		}
	})
	t.Run("template", func(t *testing.T) {
		if got, err := read("fixture://tasks/items/42"); err != nil || got != "tasks item 42" {
			t.Errorf("got %q, %v", got, err)
		}
	})
	t.Run("learned from a tool result", func(t *testing.T) {
		if _, err := read("fixture://tasks/hidden/x"); err == nil {
			t.Fatal("an unlisted URI must not be readable before a tool returned it")
		}
		callText(t, cs, "tasks__link", map[string]any{"x": "x"})
		if got, err := read("fixture://tasks/hidden/x"); err != nil || got != "tasks hidden x" {
			t.Errorf("resource_link: got %q, %v", got, err)
		}
		if got, err := read("fixture://tasks/hidden/emb-x"); err != nil || got != "tasks hidden emb-x" {
			t.Errorf("embedded resource: got %q, %v", got, err)
		}
	})
	t.Run("unknown is -32002 with the URI", func(t *testing.T) {
		_, err := read("nowhere://x")
		je := rpcCode(t, err)
		if je.Code != CodeResourceNotFound {
			t.Errorf("code %d, want -32002", je.Code)
		}
		var data map[string]string
		json.Unmarshal(je.Data, &data)
		if data["uri"] != "nowhere://x" {
			t.Errorf("data = %s, want the uri", je.Data)
		}
	})
	t.Run("mux's own", func(t *testing.T) {
		got, err := read(uriBackends)
		if err != nil || !strings.Contains(got, `"name": "tasks"`) {
			t.Errorf("got %q, %v", got, err)
		}
	})
}

func TestBackendErrorCodeReachesAgentUnchanged(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs := connect(t, m, nil)
	_, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__fail", Arguments: map[string]any{"code": -32602, "message": "bad argument x"}})
	je := rpcCode(t, err)
	if je.Code != -32602 || je.Message != "bad argument x" {
		t.Errorf("got %d %q, want -32602 \"bad argument x\"", je.Code, je.Message)
	}
	_, err = cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__fail", Arguments: map[string]any{"code": -31999, "message": "custom"}})
	if je := rpcCode(t, err); je.Code != -31999 {
		t.Errorf("custom code: got %d", je.Code)
	}
}

// listsSettled reports whether m has no list_changed left to send: no
// backend's list_changed waits for its refresh, none is being refreshed,
// and the notifier holds no mark. (Marks come only from refreshes; one
// the notifier took is in the agent's queue once deliver returns.)
func listsSettled(m *Mux) bool {
	for _, mem := range m.members() {
		mem.mu.Lock()
		dirty := mem.dirty
		mem.mu.Unlock()
		if dirty != 0 || len(mem.wake) > 0 {
			return false
		}
	}
	m.lists.mu.Lock()
	pending := m.lists.pending
	m.lists.mu.Unlock()
	return pending == 0 && len(m.lists.wake) == 0 &&
		!testkit.GoroutineIn("mux.(*member).refresh(") && !testkit.GoroutineIn("mux.(*Mux).deliver(")
}

func TestListChangedRefreshesAndCoalesces(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	var n atomic.Int32
	cs := connect(t, m, &mcp.ClientOptions{ToolListChangedHandler: func(ctx context.Context, r *mcp.ToolListChangedRequest) { n.Add(1) }})

	// A new tool: the list is refreshed and the agent told.
	callText(t, cs, "notes__add_tool", map[string]any{"name": "fresh"})
	testkit.Eventually(t, 5*time.Second, "notes__fresh in tools/list", func() bool {
		return slices.Contains(toolNames(t, cs), "notes__fresh")
	})
	testkit.Eventually(t, 5*time.Second, "a tools/list_changed", func() bool { return n.Load() >= 1 })

	// A burst of 50 from the backend (no real change) costs the agent at most two.
	testkit.Eventually(t, 5*time.Second, "nothing left to announce", func() bool { return listsSettled(m) })
	n.Store(0)
	callText(t, cs, "notes__add_tool", map[string]any{"name": "fresh2"})
	callText(t, cs, "notes__notify_list_changed", map[string]any{"kind": "tools", "count": 50})
	testkit.Quiet(500 * time.Millisecond) // a third list_changed may not come: the burst was sent at once
	if got := n.Load(); got < 1 || got > 2 {
		t.Errorf("burst of 50 list_changed became %d upstream, want 1 or 2", got)
	}
}

func TestBackendFailingToStartDoesNotStopOthers(t *testing.T) {
	m := startMux(t, fixture(t, "broken", "-fail-start"), fixture(t, "good"), backendsSpecMissing())
	cs := connect(t, m, nil)
	names := toolNames(t, cs)
	if !slices.Contains(names, "good__stats") {
		t.Fatalf("good backend's tools missing: %v", names)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "broken__") {
			t.Errorf("tool of the failed backend listed: %s", n)
		}
	}
	// Restarted with backoff until restart_max crashes, then failed.
	testkit.Eventually(t, 5*time.Second, "both broken backends to be failed", func() bool {
		st := m.Status()
		return st[0].State == stateFailed && st[2].State == stateFailed
	})
	st := m.Status()
	if !strings.Contains(st[0].LastError, "failing on purpose") || st[0].Restarts != 4 {
		t.Errorf("broken status = %+v, want its stderr and 4 restarts (restart_max 5)", st[0])
	}
}

func backendsSpecMissing() config.Backend {
	return config.Backend{Name: "missing", Command: "/nonexistent/mcp-server"}
}

func TestCompletionRoutesByReference(t *testing.T) {
	m := startMux(t, fixture(t, "notes"), fixture(t, "tasks"))
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)
	res, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "tasks__greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Completion.Values, []string{"bob"}) {
		t.Errorf("prompt completion = %v", res.Completion.Values)
	}
	res, err = cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: "fixture://tasks/items/{id}"},
		Argument: mcp.CompleteParamsArgument{Name: "id", Value: "4"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Completion.Values, []string{"42"}) {
		t.Errorf("template completion = %v", res.Completion.Values)
	}
}

func TestProgressReachesTheCallingSession(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	var got atomic.Int32
	cs := connect(t, m, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		if r.Params.ProgressToken == "tok-1" {
			got.Add(1)
		}
	}})
	params := &mcp.CallToolParams{Name: "notes__progress", Arguments: map[string]any{"steps": 3, "delay_ms": 1}}
	params.SetProgressToken("tok-1")
	if _, err := cs.CallTool(testkit.CtxT(t), params); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 2*time.Second, "3 progress notifications", func() bool { return got.Load() == 3 })
}

// TestConcurrentStart: ten backends that each take 1 s to start serve
// their first tools/list together. Started one after the other they would
// take 10 s at least; the bound is half that, so a loaded machine does not
// fail it and a sequential start cannot pass it.
func TestConcurrentStart(t *testing.T) {
	testkit.SkipUnderWine(t, "a process starts several times slower than on Windows (the fixture: about 150 ms), so the time bound does not hold")
	var specs []config.Backend
	for i := range 10 {
		specs = append(specs, fixture(t, fmt.Sprintf("slow%d", i), "-start-delay", "1s"))
	}
	start := time.Now()
	m := startMux(t, specs...)
	cs := connect(t, m, nil)
	names := toolNames(t, cs)
	elapsed := time.Since(start)
	if len(names) != 10*(1+len(controlTools)) {
		t.Fatalf("got %d tools, want %d", len(names), 10*(1+len(controlTools)))
	}
	t.Logf("10 backends × 1 s start delay: first full tools/list after %v", elapsed)
	if elapsed > 5*time.Second {
		t.Errorf("first tools/list after %v: the backends did not start together (one after the other: 10 s)", elapsed)
	}
}
