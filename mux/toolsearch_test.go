package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Tool lists that fit each agent (toolsearch.go): the modes, auto by
// agent, pinned tools, what search finds and does not, calling what it
// found by name and through call_tool, the working set, and reloads.

// searchMux is a mux over two fixture backends (notes, whose echo is
// pinned, and tasks) with tool_list as given.
func searchMux(t *testing.T, mode string, max int) *Mux {
	t.Helper()
	notes := fixture(t, "notes", "-tools", "echo,shout")
	notes.Tools = []string{"echo", "shout"} // the filter: its other tools are not exposed
	notes.Pin = []string{"echo"}
	cfg := testConfig(notes, fixture(t, "tasks"))
	cfg.Mux.ToolList, cfg.Mux.ToolListMax = mode, max
	return startMuxConfig(t, cfg)
}

// agentNamed connects an agent whose clientInfo name is name.
func agentNamed(t *testing.T, m *Mux, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, m, mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts), legacyEra)
}

func listedTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	out := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(testkit.CtxT(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = tool
	}
	return out
}

func TestToolListModes(t *testing.T) {
	for _, tc := range []struct {
		mode, agent string
		max         int
		search      bool
	}{
		{config.ToolListAll, "some-agent", 10, false},
		{config.ToolListSearch, "some-agent", 1000, true},
		{config.ToolListAuto, "claude-ai", 10, true},    // more tools than tool_list_max
		{config.ToolListAuto, "claude-ai", 1000, false}, // fewer
		{config.ToolListAuto, "claude-code", 10, false}, // it searches itself
		{config.ToolListAuto, "cursor-vscode", 1000, false},
	} {
		t.Run(tc.mode+"/"+tc.agent, func(t *testing.T) {
			m := searchMux(t, tc.mode, tc.max)
			tools := listedTools(t, agentNamed(t, m, tc.agent, nil))
			_, own := tools[toolSearch]
			// The pinned tool, search_tools and the two wrappers.
			if own != tc.search || (tc.search && len(tools) != 4) {
				t.Fatalf("%d tools (search_tools listed: %v), want the search surface: %v", len(tools), own, tc.search)
			}
			if tools["notes__echo"] == nil {
				t.Errorf("the pinned notes__echo is not listed")
			}
			if tc.search {
				if tools[toolCall] == nil || tools[toolCallReadOnly] == nil {
					t.Errorf("call_tool or call_read_only_tool is not listed")
				}
				return
			}
			meta := tools["notes__echo"].Meta
			if tc.agent == "claude-code" {
				if meta["anthropic/alwaysLoad"] != true || !strings.HasPrefix(meta["anthropic/searchHint"].(string), "notes") {
					t.Errorf("pinned tool's _meta for Claude Code: %v", meta)
				}
				if tasks := tools["tasks__stats"].Meta; tasks["anthropic/alwaysLoad"] != nil || tasks["anthropic/searchHint"] == nil {
					t.Errorf("another tool's _meta for Claude Code: %v", tasks)
				}
			} else if meta["anthropic/searchHint"] != nil {
				t.Errorf("_meta for Claude Code went to %s: %v", tc.agent, meta)
			}
		})
	}
}

// TestAutoGivesEachAgentWhatItGetsDirectly: "auto" lists every tool to an
// agent that takes them all when it runs the servers directly; only an
// agent's own limit (Cursor's 40) or the small list chosen for it (Claude
// Desktop, past tool_list_max) is the search surface. The clientInfo names
// are the ones each agent sent (mux/agents), and the MCP Inspector's.
func TestAutoGivesEachAgentWhatItGetsDirectly(t *testing.T) {
	var extra []string
	for i := range 44 {
		extra = append(extra, fmt.Sprintf("tool%02d", i))
	}
	cfg := testConfig(fixture(t, "many", "-tools", strings.Join(extra, ",")))
	cfg.Mux.ToolList, cfg.Mux.ToolListMax = config.ToolListAuto, 20
	m := startMuxConfig(t, cfg)
	for agent, search := range map[string]bool{
		"codex-mcp-client":      false,
		"gemini-cli-mcp-client": false,
		"opencode":              false,
		"copilot-cli":           false,
		"inspector-client":      false, // the MCP Inspector
		"some-agent":            false,
		"claude-code":           false,
		"Visual Studio Code":    false, // 128 at most
		"cursor-vscode":         true,  // 40 at most
		"claude-ai":             true,  // past tool_list_max
	} {
		t.Run(agent, func(t *testing.T) {
			tools := listedTools(t, agentNamed(t, m, agent, nil))
			if got := tools[toolSearch] != nil; got != search {
				t.Fatalf("auto gave %s %d tools (search_tools listed: %v), want the search surface: %v", agent, len(tools), got, search)
			}
			if !search && (len(tools) < 45 || tools["many__tool43"] == nil) {
				t.Errorf("auto gave %s %d tools, want every one (45 and more)", agent, len(tools))
			}
		})
	}
}

// searchFor calls search_tools and returns the names it found, best first.
func searchFor(t *testing.T, cs *mcp.ClientSession, args map[string]any) ([]string, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: toolSearch, Arguments: args})
	if err != nil {
		t.Fatalf("search_tools: %v", err)
	}
	if res.IsError {
		return nil, res
	}
	var out struct {
		Tools []struct {
			Name, Backend string
		} `json:"tools"`
	}
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range out.Tools {
		names = append(names, tool.Name)
	}
	return names, res
}

func TestSearchFindsOnlyWhatTheAgentCouldCall(t *testing.T) {
	notes := fixture(t, "notes", "-tools", "echo,shout")
	notes.Tools, notes.Pin = []string{"echo", "shout"}, []string{"echo"}
	tasks := fixture(t, "tasks")
	tasks.Restart = config.RestartNever // down once it crashes
	cfg := testConfig(notes, tasks)
	cfg.Mux.ToolList = config.ToolListSearch
	m := startMuxConfig(t, cfg)
	cs := agentNamed(t, m, "some-agent", nil)
	found, _ := searchFor(t, cs, map[string]any{"query": "echo its arguments"})
	if !slices.Contains(found, "tasks__echo") || slices.Contains(found, "notes__echo") {
		t.Errorf("found %v: want tasks__echo, and not the pinned notes__echo (listed already)", found)
	}
	// notes exposes only echo and shout: its other tools are filtered out.
	found, _ = searchFor(t, cs, map[string]any{"query": "stats request counters", "limit": 20})
	if slices.Contains(found, "notes__stats") || !slices.Contains(found, "tasks__stats") {
		t.Errorf("found %v: want tasks__stats and never the filtered notes__stats", found)
	}
	if found, _ := searchFor(t, cs, map[string]any{"query": "echo", "backend": "notes"}); slices.Contains(found, "tasks__echo") {
		t.Errorf("backend = notes found %v", found)
	}
	// An empty query, or one that matches nothing, is a tool error that
	// says what there is.
	for _, q := range []string{"", "zzqqxx"} {
		_, res := searchFor(t, cs, map[string]any{"query": q})
		if got := text(t, res.Content); !res.IsError || !strings.Contains(got, "notes (2), tasks (") {
			t.Logf("got %q", got)
			t.Errorf("query %q: %+v, want a tool error listing the backends and their tool counts", q, res)
		}
	}
	// A backend that is down is not searched.
	cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "tasks__crash"}) // fails: it exits
	testkit.Eventually(t, 10*time.Second, "tasks down", func() bool { return !m.members()[1].serving() })
	if found, _ := searchFor(t, cs, map[string]any{"query": "stats request counters"}); slices.Contains(found, "tasks__stats") {
		t.Errorf("found %v while tasks is down", found)
	}
}

// search_tools with a backend the session does not have says so, with
// the nearest name, and the backends it has, instead of "no tool matches".
// A backend's tools' prefix names it too, as the argument's description
// says.
func TestSearchForAnUnknownBackendSaysSo(t *testing.T) {
	notes, tasks := fixture(t, "notes"), fixture(t, "tasks")
	prefix := "todo"
	tasks.Prefix = &prefix
	cfg := testConfig(notes, tasks)
	cfg.Mux.ToolList = config.ToolListSearch
	cs := agentNamed(t, startMuxConfig(t, cfg), "some-agent", nil)
	for _, tc := range []struct{ backend, want string }{
		{"taks", `no backend "taks" in this session; did you mean "tasks"? `},
		{"zzqqxx", `no backend "zzqqxx" in this session. `},
	} {
		_, res := searchFor(t, cs, map[string]any{"query": "echo", "backend": tc.backend})
		got := text(t, res.Content)
		if !res.IsError || !strings.HasPrefix(got, tc.want) || !strings.Contains(got, "The backends and their tools: notes (") || !strings.Contains(got, "tasks (") {
			t.Errorf("backend %q: %q (error: %v), want a tool error starting %q and listing the backends", tc.backend, got, res.IsError, tc.want)
		}
	}
	if found, res := searchFor(t, cs, map[string]any{"query": "echo", "backend": "todo"}); !slices.Contains(found, "todo__echo") ||
		slices.ContainsFunc(found, func(n string) bool { return !strings.HasPrefix(n, "todo__") }) {
		t.Errorf("backend = todo, the prefix of tasks: found %q (%s), want todo__echo and only tasks' tools", found, text(t, res.Content))
	}
}

// TestAFoundToolCallsTheSameByNameAndThroughCallTool: what search found,
// called by its name or through call_tool, gives what it gives in "all"
// mode: the result, progress, and cancellation at the backend.
func TestAFoundToolCallsTheSameByNameAndThroughCallTool(t *testing.T) {
	var mu sync.Mutex
	progress := map[string]int{}
	opts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		progress[r.Params.ProgressToken.(string)]++
		mu.Unlock()
	}}
	all := agentNamed(t, searchMux(t, config.ToolListAll, 64), "some-agent", opts)
	m := searchMux(t, config.ToolListSearch, 64)
	cs := agentNamed(t, m, "some-agent", opts)
	if found, _ := searchFor(t, cs, map[string]any{"query": "progress notifications"}); !slices.Contains(found, "tasks__progress") {
		t.Fatalf("search found %v", found)
	}
	args := map[string]any{"steps": 3}
	call := func(cs *mcp.ClientSession, name string, args any, token string) string {
		t.Helper()
		res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{"progressToken": token}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data, _ := json.Marshal(res.Content)
		return string(data)
	}
	want := call(all, "tasks__progress", args, "all")
	byName := call(cs, "tasks__progress", args, "byname")
	through := call(cs, toolCall, map[string]any{"name": "tasks__progress", "arguments": args}, "through")
	if byName != want || through != want {
		t.Errorf("results: by name %s, through call_tool %s, in all mode %s", byName, through, want)
	}
	testkit.Eventually(t, 5*time.Second, "3 progress notifications for each call", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return progress["all"] == 3 && progress["byname"] == 3 && progress["through"] == 3
	})

	// Cancelled through call_tool: the backend hears of it.
	ctx, cancel := context.WithCancel(context.Background())
	arrived := testkit.Arrived(func() int { return testkit.Requests(callText(t, cs, "tasks__stats", nil)) })
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolCall, Arguments: map[string]any{"name": "tasks__sleep", "arguments": map[string]any{"ms": 30000}}})
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the sleep at the backend", arrived)
	cancel()
	<-done
	testkit.Eventually(t, 10*time.Second, "the backend to see the cancellation", func() bool {
		return fixtureStats(t, cs, "tasks__stats").Cancelled > 0
	})
}

// TestAToolFoundAndCalledJoinsTheList: the working set, announced with
// tools/list_changed.
func TestAToolFoundAndCalledJoinsTheList(t *testing.T) {
	changed := make(chan struct{}, 10)
	m := searchMux(t, config.ToolListSearch, 64)
	cs := agentNamed(t, m, "some-agent", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	if tools := listedTools(t, cs); tools["tasks__stats"] != nil {
		t.Fatalf("tasks__stats listed before it was found")
	}
	searchFor(t, cs, map[string]any{"query": "stats request counters"})
	callText(t, cs, "tasks__stats", nil)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after a found tool was called")
	}
	if tools := listedTools(t, cs); tools["tasks__stats"] == nil || tools[toolSearch] == nil {
		t.Errorf("after the call, the list is %v", tools)
	}
}

// TestAReloadChangesWhatSearchFinds: a backend added by a reload is
// searched, and one removed is not.
func TestAReloadChangesWhatSearchFinds(t *testing.T) {
	path := t.TempDir() + "/mcp-mux.toml"
	write := func(backends ...string) {
		src := "[mux]\ntool_list = \"search\"\n"
		for _, b := range backends {
			src += "[[backend]]\nname = \"" + b + "\"\ncommand = '" + testkit.FixtureBin(t) + "'\nargs = [\"-name\", \"" + b + "\", \"-tools\", \"" + b + "_special\"]\n"
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m := startMuxConfig(t, cfg)
	cs := agentNamed(t, m, "some-agent", nil)
	if found, _ := searchFor(t, cs, map[string]any{"query": "two_special"}); slices.Contains(found, "two__two_special") {
		t.Fatalf("found %v before two was added", found)
	}
	write("two")
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "two's tool in the search", func() bool {
		found, _ := searchFor(t, cs, map[string]any{"query": "two_special"})
		return slices.Contains(found, "two__two_special") && !slices.Contains(found, "one__one_special")
	})
}

// headerTransport sets one header on every request.
type headerTransport struct{ key, value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

func TestAnHTTPAgentPicksItsOwnToolList(t *testing.T) {
	m := searchMux(t, config.ToolListAll, 64)
	url := serveHTTP(t, m, door.HTTPOptions{})
	connect := func(endpoint string, client *http.Client) map[string]*mcp.Tool {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "team-agent", Version: "1"}, nil)
		cs, err := c.Connect(testkit.CtxT(t), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: client}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return listedTools(t, cs)
	}
	if tools := connect(url+"?tool_list=search", nil); len(tools) != 4 || tools[toolSearch] == nil {
		t.Errorf("?tool_list=search: listed %v, want the search surface", slices.Sorted(maps.Keys(tools)))
	}
	byHeader := &http.Client{Transport: headerTransport{door.ToolListHeader, "search"}}
	if tools := connect(url, byHeader); len(tools) != 4 || tools[toolCall] == nil {
		t.Errorf("%s: search: listed %v, want the search surface", door.ToolListHeader, slices.Sorted(maps.Keys(tools)))
	}
	if tools := connect(url, nil); tools[toolSearch] != nil || tools["notes__shout"] == nil {
		t.Errorf("an agent that asked for nothing: listed %v, want every tool (tool_list = all)", slices.Sorted(maps.Keys(tools)))
	}
	if tools := connect(url+"?tool_list=bogus", nil); tools[toolSearch] != nil {
		t.Errorf("?tool_list=bogus: listed %v, want the config's list", slices.Sorted(maps.Keys(tools)))
	}
}

// A backend tool exposed as search_tools or call_tool is a collision that
// check reports, and mux's own tool wins.
func TestABackendToolNamedLikeMuxsOwnIsACollision(t *testing.T) {
	bare := ""
	b := fixture(t, "raw", "-tools", "search_tools")
	b.Prefix = &bare
	r := Inspect(context.Background(), testConfig(b), testLogger(t), "test")
	var found bool
	for _, c := range r.Collisions {
		if c.Kind == "tool" && c.Name == toolSearch && c.Winner == "mcp-mux" && c.Loser == "raw" {
			found = true
		}
	}
	if !found {
		t.Errorf("collisions %+v: want search_tools, won by mcp-mux over raw", r.Collisions)
	}
}
