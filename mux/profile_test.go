package mux

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Profiles (profile.go): each way of asking for one, matching by
// clientInfo, every kind of object filtered, no leak of what a profile
// hides, one process per backend, and reloads.

// profileMux is a mux over three fixtures, gh, fs and db, each with its
// own instructions, and the profile "cursor" (gh's issue tools and fs's
// read tools, never a delete; clients "cursor*"), "ro" (fs only) and
// "dbonly".
func profileMux(t *testing.T, opts ...Option) *Mux {
	t.Helper()
	gh := fixture(t, "gh", "-tools", "list_issues,delete_issue,get_repo", "-instructions", "GH-INSTRUCTIONS")
	fs := fixture(t, "fs", "-tools", "read_file,write_file", "-instructions", "FS-INSTRUCTIONS")
	db := fixture(t, "db", "-tools", "query", "-instructions", "DB-INSTRUCTIONS")
	cfg := testConfig(gh, fs, db)
	cfg.Profiles = []config.Profile{
		{Name: "cursor", Backends: []string{"gh", "fs"}, Tools: []string{"gh__*issue*", "fs__read*"}, ExcludeTools: []string{"*__delete_*"}, Clients: []string{"cursor*"}},
		{Name: "ro", Backends: []string{"fs"}},
		{Name: "dbonly", Backends: []string{"db"}},
	}
	m := New(cfg, testLogger(t), "test", opts...)
	m.backoffBase = 10 * time.Millisecond
	m.Start()
	t.Cleanup(m.Close)
	return m
}

// sameError asserts that err, for the name hidden, is the error of the
// name absent, which does not exist: same code, same message and data
// once each name is written X.
func sameError(t *testing.T, hidden, absent string, errHidden, errAbsent error) {
	t.Helper()
	h, a := rpcCode(t, errHidden), rpcCode(t, errAbsent)
	hm, am := strings.ReplaceAll(h.Message, hidden, "X"), strings.ReplaceAll(a.Message, absent, "X")
	hd, ad := strings.ReplaceAll(string(h.Data), hidden, "X"), strings.ReplaceAll(string(a.Data), absent, "X")
	if h.Code != a.Code || hm != am || hd != ad {
		t.Errorf("hidden %q: %d %q %s\nabsent %q: %d %q %s\nwant the same error", hidden, h.Code, h.Message, h.Data, absent, a.Code, a.Message, a.Data)
	}
}

func TestAProfileChosenByClientInfoFiltersEverything(t *testing.T) {
	m := profileMux(t)
	cs := agentNamed(t, m, "Cursor", nil) // "cursor*", case-insensitive
	ctx := testkit.CtxT(t)

	if got := slices.Sorted(maps.Keys(listedTools(t, cs))); !slices.Equal(got, []string{"fs__read_file", "gh__list_issues"}) {
		t.Errorf("tools: %q, want gh__list_issues and fs__read_file", got)
	}
	if got := callText(t, cs, "gh__list_issues", map[string]any{"text": "hi"}); !strings.Contains(got, "hi") {
		t.Errorf("gh__list_issues: %q", got)
	}
	// Hidden by the globs, by exclude_tools, or with its backend: each is
	// unknown exactly as a name that does not exist.
	for _, hidden := range []string{"gh__get_repo", "gh__delete_issue", "db__query", "db__echo"} {
		_, errHidden := cs.CallTool(ctx, &mcp.CallToolParams{Name: hidden, Arguments: map[string]any{}})
		_, errAbsent := cs.CallTool(ctx, &mcp.CallToolParams{Name: "zz__nothing", Arguments: map[string]any{}})
		if rpcCode(t, errHidden).Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: %v, want -32602", hidden, errHidden)
		}
		sameError(t, hidden, "zz__nothing", errHidden, errAbsent)
		// Through the wrapper too.
		_, errWrapped := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolCall, Arguments: map[string]any{"name": hidden, "arguments": map[string]any{}}})
		_, errWrappedAbsent := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolCall, Arguments: map[string]any{"name": "zz__nothing", "arguments": map[string]any{}}})
		sameError(t, hidden, "zz__nothing", errWrapped, errWrappedAbsent)
	}

	for _, p := range promptNames(t, cs) {
		if !strings.HasPrefix(p, "gh__") && !strings.HasPrefix(p, "fs__") {
			t.Errorf("prompt %q of a backend outside the profile", p)
		}
	}
	_, errHidden := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "db__greet", Arguments: map[string]string{"name": "x"}})
	_, errAbsent := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "zz__greet", Arguments: map[string]string{"name": "x"}})
	sameError(t, "db__greet", "zz__greet", errHidden, errAbsent)
	_, errHidden = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "db__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "a"}})
	_, errAbsent = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "zz__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "a"}})
	sameError(t, "db__greet", "zz__greet", errHidden, errAbsent)
	if _, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "gh__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "a"}}); err != nil {
		t.Errorf("completing gh__greet: %v", err)
	}

	templates := templateURIs(t, cs)
	if len(templates) == 0 {
		t.Errorf("no templates: want gh's and fs's")
	}
	for _, tpl := range templates {
		if strings.Contains(tpl, "//db/") {
			t.Errorf("template %q of db", tpl)
		}
	}
	resources := listed(t, cs.Resources(ctx, nil), func(r *mcp.Resource) string { return r.URI })
	if !slices.Contains(resources, "fixture://gh/res/1") || !slices.Contains(resources, "fixture://fs/res/1") {
		t.Errorf("resources %q: want gh's and fs's", resources)
	}
	for _, r := range resources {
		if strings.Contains(r, "//db/") {
			t.Errorf("resource %q of db", r)
		}
	}
	_, errHidden = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fixture://db/res/1"})
	_, errAbsent = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fixture://zz/res/1"})
	sameError(t, "fixture://db/res/1", "fixture://zz/res/1", errHidden, errAbsent)
	errHidden = cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "fixture://db/res/1"})
	errAbsent = cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "fixture://zz/res/1"})
	sameError(t, "fixture://db/res/1", "fixture://zz/res/1", errHidden, errAbsent)
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "fixture://fs/res/1"}); err != nil {
		t.Errorf("subscribing to fs's resource: %v", err)
	}

	instr := cs.InitializeResult().Instructions
	if !strings.Contains(instr, "GH-INSTRUCTIONS") || !strings.Contains(instr, "FS-INSTRUCTIONS") || strings.Contains(instr, "DB-INSTRUCTIONS") || strings.Contains(instr, "## db") {
		t.Errorf("instructions: want gh's and fs's only, got:\n%s", instr)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uriInstructions + "db"}); err == nil {
		t.Errorf("%sdb read by a session whose profile has no db", uriInstructions)
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uriBackends})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Profile  string `json:"profile"`
		Backends []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range doc.Backends {
		names = append(names, b.Name)
	}
	if doc.Profile != "cursor" || !slices.Equal(names, []string{"gh", "fs"}) {
		t.Errorf("%s: profile %q, backends %q; want cursor, gh and fs", uriBackends, doc.Profile, names)
	}

	// Another agent, matching no profile, sees everything.
	other := agentNamed(t, m, "some-agent", nil)
	if tools := listedTools(t, other); tools["db__query"] == nil || tools["gh__delete_issue"] == nil {
		t.Errorf("an agent of no profile: listed %q, want every tool", slices.Sorted(maps.Keys(tools)))
	}
}

// search_tools finds only what the profile has, and its answers never
// name what it hides.
func TestSearchInAProfileNeverNamesWhatItHides(t *testing.T) {
	m := profileMux(t)
	m.conf.Load().cfg.Profiles[0].ToolList = config.ToolListSearch // read per session
	cs := agentNamed(t, m, "cursor-nightly", nil)
	tools := listedTools(t, cs)
	if tools[toolSearch] == nil || tools["gh__list_issues"] != nil {
		t.Fatalf("profile tool_list = search: listed %q, want the search surface", slices.Sorted(maps.Keys(tools)))
	}
	found, _ := searchFor(t, cs, map[string]any{"query": "issue", "limit": 20})
	if !slices.Equal(found, []string{"gh__list_issues"}) {
		t.Errorf("search issue: %q, want gh__list_issues only", found)
	}
	for _, q := range []map[string]any{{"query": "delete"}, {"query": "query"}, {"query": "echo", "backend": "dc"}, {"query": ""}} {
		found, res := searchFor(t, cs, q)
		out, _ := json.Marshal(res)
		for _, hidden := range []string{"delete_issue", "get_repo", "db", "write_file"} {
			if strings.Contains(string(out), hidden) || slices.ContainsFunc(found, func(n string) bool { return strings.Contains(n, hidden) }) {
				t.Errorf("search %v names %q, hidden by the profile: %s", q, hidden, out)
			}
		}
	}
	// A backend the profile hides is answered as one that does not exist.
	_, hidden := searchFor(t, cs, map[string]any{"query": "echo", "backend": "db"})
	_, absent := searchFor(t, cs, map[string]any{"query": "echo", "backend": "zz"})
	if h, a := strings.ReplaceAll(text(t, hidden.Content), `"db"`, "X"), strings.ReplaceAll(text(t, absent.Content), `"zz"`, "X"); h != a || !hidden.IsError {
		t.Errorf("search in the hidden backend db: %q\nin the absent zz: %q\nwant the same error", h, a)
	}
}

// A stdio mcp-mux launched with --profile runs that profile's backends
// only: the others never start, and its session sees only the profile.
func TestALaunchProfileRunsOnlyItsBackends(t *testing.T) {
	m := profileMux(t, WithProfile("ro"))
	cs := agentNamed(t, m, "cursor", nil) // its clients do not matter: the launch asked
	for name := range listedTools(t, cs) {
		if !strings.HasPrefix(name, "fs__") {
			t.Errorf("tool %q outside the profile ro", name)
		}
	}
	var running []string
	for _, st := range m.Status() {
		running = append(running, st.Name)
	}
	if !slices.Equal(running, []string{"fs"}) {
		t.Errorf("backends %q, want fs only", running)
	}
	_, errHidden := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "gh__list_issues", Arguments: map[string]any{}})
	_, errAbsent := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "zz__nothing", Arguments: map[string]any{}})
	sameError(t, "gh__list_issues", "zz__nothing", errHidden, errAbsent)
}

// Over HTTP: /mcp/NAME and the header ask for a profile, /mcp is every
// backend, an unknown profile is a 404 naming the profiles; the sessions
// of three profiles share one process per backend.
func TestHTTPProfilesByPathAndHeaderShareTheBackends(t *testing.T) {
	m := profileMux(t)
	url := serveHTTP(t, m, door.HTTPOptions{})
	connect := func(endpoint string, client *http.Client) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "team-agent", Version: "1"}, nil)
		cs, err := c.Connect(testkit.CtxT(t), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: client}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	byPath := connect(url+"/ro", nil)
	byHeader := connect(url, &http.Client{Transport: headerTransport{door.ProfileHeader, "dbonly"}})
	all := connect(url, nil)
	byClient := connect(url+"/cursor", nil)
	prefixes := func(cs *mcp.ClientSession) []string {
		var out []string
		for name := range listedTools(t, cs) {
			p, _, _ := strings.Cut(name, "__")
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return out
	}
	if got := prefixes(byPath); !slices.Equal(got, []string{"fs"}) {
		t.Errorf("/mcp/ro: backends %q, want fs", got)
	}
	if got := prefixes(byHeader); !slices.Equal(got, []string{"db"}) {
		t.Errorf("%s: dbonly: backends %q, want db", door.ProfileHeader, got)
	}
	if got := prefixes(all); !slices.Equal(got, []string{"db", "fs", "gh"}) {
		t.Errorf("/mcp: backends %q, want all three", got)
	}
	if got := slices.Sorted(maps.Keys(listedTools(t, byClient))); !slices.Equal(got, []string{"fs__read_file", "gh__list_issues"}) {
		t.Errorf("/mcp/cursor: %q", got)
	}
	// One process per backend, whoever calls it.
	pid := func(cs *mcp.ClientSession, tool string) int { return fixtureStats(t, cs, tool).PID }
	if a, b := pid(byPath, "fs__stats"), pid(all, "fs__stats"); a != b || a == 0 {
		t.Errorf("fs's pid: %d for ro, %d for /mcp: want one process", a, b)
	}
	if a, b := pid(byHeader, "db__stats"), pid(all, "db__stats"); a != b || a == 0 {
		t.Errorf("db's pid: %d for dbonly, %d for /mcp: want one process", a, b)
	}
	for _, st := range m.Status() {
		if st.Restarts != 0 {
			t.Errorf("backend %s restarted %d times", st.Name, st.Restarts)
		}
	}
	// A tool call on the fast path is filtered as the go-sdk's path is.
	_, errHidden := byPath.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "db__query", Arguments: map[string]any{}})
	_, errAbsent := byPath.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "zz__nothing", Arguments: map[string]any{}})
	sameError(t, "db__query", "zz__nothing", errHidden, errAbsent)

	for _, bad := range []struct {
		url    string
		header string
	}{{url + "/nope", ""}, {url, "nope"}, {url + "/ro/x", ""}} {
		req, _ := http.NewRequest(http.MethodPost, bad.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if bad.header != "" {
			req.Header.Set(door.ProfileHeader, bad.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "the profiles of test.toml are cursor, ro, dbonly") {
			t.Errorf("%s (header %q): %d %q, want 404 naming the profiles", bad.url, bad.header, resp.StatusCode, body)
		}
	}
}

// A reload that changes a profile changes what its live sessions see,
// and tells them with list_changed.
func TestAReloadAppliesProfileChangesToLiveSessions(t *testing.T) {
	path := t.TempDir() + "/mcp-mux.toml"
	write := func(backends string) {
		src := "[mux]\ntool_list = \"all\"\n" + backendTOML(t, "one") + backendTOML(t, "two") +
			"[profile.p]\nbackends = [" + backends + "]\nclients = [\"agent-p\"]\n"
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`"one"`)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m := startMuxConfig(t, cfg)
	changed := make(chan struct{}, 10)
	cs := agentNamed(t, m, "agent-p", &mcp.ClientOptions{ToolListChangedHandler: func(ctx context.Context, req *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	if tools := listedTools(t, cs); tools["one__echo"] == nil || tools["two__echo"] != nil {
		t.Fatalf("before: %q, want one's tools only", slices.Sorted(maps.Keys(tools)))
	}
	write(`"two"`)
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after the profile changed")
	}
	if tools := listedTools(t, cs); tools["two__echo"] == nil || tools["one__echo"] != nil {
		t.Errorf("after: %q, want two's tools only", slices.Sorted(maps.Keys(tools)))
	}
}

// A reload that takes a backend out of a session's view ends that
// session's subscriptions to its resources: it gets no more updates of
// what it can no longer read, the registry lets go of its hold, and the
// backend is unsubscribed once nobody else holds the URI.
func TestAReloadThatHidesABackendDropsTheSessionsSubscriptionsToIt(t *testing.T) {
	path := t.TempDir() + "/mcp-mux.toml"
	write := func(backends string) {
		src := "[mux]\ntool_list = \"all\"\n" + backendTOML(t, "one") + backendTOML(t, "two") +
			"[profile.p]\nbackends = [" + backends + "]\nclients = [\"agent-p\"]\n"
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`"one", "two"`)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m := startMuxConfig(t, cfg)
	up, uall := newUpdates(), newUpdates()
	p := agentNamed(t, m, "agent-p", up.opts())
	all := connect(t, m, uall.opts())
	const shared, own, kept = "fixture://two/res/1", "fixture://two/res/2", "fixture://one/res/1"
	subscribe(t, p, shared)
	subscribe(t, p, own)
	subscribe(t, p, kept)
	subscribe(t, all, shared)
	callText(t, all, "two__update", map[string]any{"uri": shared})
	up.waitFor(t, shared, 1)
	uall.waitFor(t, shared, 1)

	write(`"one"`)
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := m.subs.Count("two", shared); n != 1 {
		t.Errorf("%s held %d times after the reload, want 1 (the session of every backend)", shared, n)
	}
	if n := m.subs.Count("two", own); n != 0 {
		t.Errorf("%s held %d times after the reload, want 0", own, n)
	}
	stats := fixtureStats(t, all, "two__stats")
	if stats.Unsubscribe[own] != 1 || stats.Unsubscribe[shared] != 0 {
		t.Errorf("two was unsubscribed %d times from %s (held by p alone), %d from %s (held by another session too): want 1 and 0",
			stats.Unsubscribe[own], own, stats.Unsubscribe[shared], shared)
	}
	for _, st := range m.Sessions() {
		if st.Client != "agent-p 1" {
			continue
		}
		for _, s := range m.subs.Session(st.ID) {
			if s.Backend == "two" {
				t.Errorf("p still holds %s of two", s.URI)
			}
		}
	}
	callText(t, all, "two__update", map[string]any{"uri": shared})
	callText(t, all, "two__update", map[string]any{"uri": own})
	uall.waitFor(t, shared, 2)
	up.quiet(t, 300*time.Millisecond)
	if n := up.count(shared) + up.count(own); n != 1 {
		t.Errorf("p got %d updates of two's resources, want 1 (from before the reload)", n)
	}
	// What stays in its view keeps its subscription.
	callText(t, all, "one__update", map[string]any{"uri": kept})
	up.waitFor(t, kept, 1)

	unsubscribe(t, all, shared)
	if got := fixtureStats(t, all, "two__stats").Unsubscribe[shared]; got != 1 {
		t.Errorf("two was unsubscribed %d times from %s once its last holder let go, want 1", got, shared)
	}
}

// listChangedCounter counts the tools/list_changed a client receives.
func listChangedCounter() (*mcp.ClientOptions, *atomic.Int32) {
	var n atomic.Int32
	return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { n.Add(1) }}, &n
}

// A backend outside a session's view changing its list tells that session
// nothing; one inside it does.
func TestListChangedOfABackendOutsideTheViewIsNotSent(t *testing.T) {
	m := profileMux(t)
	cOpts, cursorN := listChangedCounter()
	aOpts, allN := listChangedCounter()
	cursor := agentNamed(t, m, "cursor", cOpts)
	all := agentNamed(t, m, "some-agent", aOpts)
	listedTools(t, cursor)
	listedTools(t, all)
	c0, a0 := cursorN.Load(), allN.Load()

	callText(t, all, "db__add_tool", map[string]any{"name": "newtool"})
	testkit.Eventually(t, 10*time.Second, "tools/list_changed for db's new tool", func() bool { return allN.Load() > a0 })
	if tools := listedTools(t, all); tools["db__newtool"] == nil {
		t.Fatalf("db__newtool not listed to the session of every backend")
	}
	testkit.Quiet(300 * time.Millisecond) // absence is shown only by waiting
	if n := cursorN.Load() - c0; n != 0 {
		t.Errorf("cursor (gh, fs) got %d tools/list_changed for a change of db's tools", n)
	}

	c1 := cursorN.Load()
	callText(t, all, "fs__add_tool", map[string]any{"name": "read_more"})
	testkit.Eventually(t, 10*time.Second, "tools/list_changed to cursor for fs's new tool", func() bool { return cursorN.Load() > c1 })
	if tools := listedTools(t, cursor); tools["fs__read_more"] == nil {
		t.Errorf("fs__read_more not listed to cursor")
	}
}

// The first list of a session waits for the backends of its view only: a
// slow backend it cannot see does not delay it, whether the agent heeds
// list_changed or not (claude-ai: its lists wait for every start).
func TestTheFirstListWaitsOnlyForTheBackendsOfTheView(t *testing.T) {
	cfg := testConfig(fixture(t, "fs"), fixture(t, "slow", "-start-delay", "8s"))
	cfg.Mux.StartupTimeout.Duration = 30 * time.Second
	cfg.Mux.FirstListWait.Duration = 30 * time.Second
	cfg.Profiles = []config.Profile{{Name: "ro", Backends: []string{"fs"}, Clients: []string{"ro-agent", "claude-ai"}}}
	m := startMuxConfig(t, cfg)
	fs, _ := m.memberNamed("fs")
	testkit.Eventually(t, 20*time.Second, "fs ready", fs.serving)
	for _, agent := range []string{"ro-agent", "claude-ai"} {
		cs := agentNamed(t, m, agent, nil)
		if tools := listedTools(t, cs); tools["fs__echo"] == nil {
			t.Errorf("%s: fs__echo not listed", agent)
		}
		if state, _ := stateOf(m, "slow"); state == stateReady {
			t.Errorf("%s: its first list waited for slow, outside its view", agent)
		}
	}
}

// mcp-mux://backends read by a session of a profile shows its view's
// backends and its own session only: not the other agents'.
func TestTheBackendsResourceOfAProfileShowsOnlyItsOwnSession(t *testing.T) {
	m := profileMux(t)
	cursor := agentNamed(t, m, "Cursor", nil)
	other := agentNamed(t, m, "some-agent", nil)
	read := func(cs *mcp.ClientSession) (sessions []SessionStatus, backends []string) {
		t.Helper()
		res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: uriBackends})
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Sessions []SessionStatus
			Backends []struct{ Name string }
		}
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &doc); err != nil {
			t.Fatal(err)
		}
		for _, b := range doc.Backends {
			backends = append(backends, b.Name)
		}
		return doc.Sessions, backends
	}
	sessions, backends := read(cursor)
	if len(sessions) != 1 || sessions[0].Client != "Cursor 1" {
		t.Errorf("cursor's %s: sessions %+v, want its own only", uriBackends, sessions)
	}
	if !slices.Equal(backends, []string{"gh", "fs"}) {
		t.Errorf("cursor's %s: backends %q, want gh and fs", uriBackends, backends)
	}
	sessions, backends = read(other)
	if len(sessions) != 2 || !slices.Equal(backends, []string{"gh", "fs", "db"}) {
		t.Errorf("%s of no profile: sessions %+v, backends %q; want both sessions and every backend", uriBackends, sessions, backends)
	}
}

// Over HTTP, with remembered catalogs (start = "auto"), the agents of
// profiles chosen by their clientInfo list, search, read, subscribe,
// complete and call everything they can, and ask for what their profiles
// hide: the backend outside every profile in use never starts.
func TestABackendOutsideTheProfilesInUseNeverStartsOverHTTP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	cfg := testConfig(
		fixture(t, "gh", "-tools", "list_issues", "-instructions", "GH-INSTRUCTIONS"),
		fixture(t, "fs", "-tools", "read_file", "-instructions", "FS-INSTRUCTIONS"),
		fixture(t, "db", "-tools", "query", "-instructions", "DB-INSTRUCTIONS"))
	learn(t, cfg, path)
	cfg.Mux.Start = config.StartAuto
	tools := []string{"*__echo", "*__list_issues", "*__read_file"} // none that crashes or hangs
	cfg.Profiles = []config.Profile{
		{Name: "lister", Backends: []string{"gh", "fs"}, Tools: tools, Clients: []string{"cursor*"}},
		{Name: "searcher", Backends: []string{"gh", "fs"}, Tools: tools, ToolList: config.ToolListSearch, Clients: []string{"windsurf*"}},
	}
	m := runWithMemory(t, cfg, path)
	url := serveHTTP(t, m, door.HTTPOptions{})
	connect := func(name, version string) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
		cs, err := c.Connect(testkit.CtxT(t), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	ctx := testkit.CtxT(t)
	dbAtRest := func(after string) {
		t.Helper()
		if state, pid := stateOf(m, "db"); state != stateRemembered || pid != 0 {
			t.Fatalf("db after %s: state %q pid %d, want remembered, never started", after, state, pid)
		}
	}
	dbAtRest("the start")

	lister := connect("Cursor", legacyEra) // the handshake era: initialize, resources/subscribe
	if instr := lister.InitializeResult().Instructions; strings.Contains(instr, "DB-INSTRUCTIONS") || !strings.Contains(instr, "GH-INSTRUCTIONS") {
		t.Errorf("lister's instructions: %q", instr)
	}
	listedNames := slices.Sorted(maps.Keys(listedTools(t, lister)))
	if !slices.Equal(listedNames, []string{"fs__read_file", "gh__list_issues"}) {
		t.Errorf("lister's tools: %q", listedNames)
	}
	promptNames(t, lister)
	templateURIs(t, lister)
	resources := listed(t, lister.Resources(ctx, nil), func(r *mcp.Resource) string { return r.URI })
	dbAtRest("the lists")
	for _, name := range listedNames {
		callText(t, lister, name, map[string]any{"text": "x"})
	}
	for _, uri := range resources {
		if strings.HasPrefix(uri, "fixture://") {
			if _, err := lister.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
				t.Errorf("read %s: %v", uri, err)
			}
		}
	}
	for _, uri := range []string{uriBackends, uriSubscriptions, uriInstructions + "gh", uriInstructions + "fs"} {
		if _, err := lister.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
			t.Errorf("read %s: %v", uri, err)
		}
	}
	subscribe(t, lister, "fixture://gh/res/1")
	if _, err := lister.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fs__greet", Arguments: map[string]string{"name": "x"}}); err != nil {
		t.Errorf("fs__greet: %v", err)
	}
	if _, err := lister.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "gh__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "a"}}); err != nil {
		t.Errorf("completing gh__greet: %v", err)
	}
	// What the profile hides: each is refused without waking db.
	if _, err := lister.CallTool(ctx, &mcp.CallToolParams{Name: "db__echo", Arguments: map[string]any{}}); err == nil {
		t.Errorf("db__echo called")
	}
	if _, err := lister.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fixture://db/res/1"}); err == nil {
		t.Errorf("fixture://db/res/1 read")
	}
	if _, err := lister.ReadResource(ctx, &mcp.ReadResourceParams{URI: uriInstructions + "db"}); err == nil {
		t.Errorf("%sdb read", uriInstructions)
	}
	if err := lister.Subscribe(ctx, &mcp.SubscribeParams{URI: "fixture://db/res/1"}); err == nil {
		t.Errorf("fixture://db/res/1 subscribed")
	}
	if _, err := lister.GetPrompt(ctx, &mcp.GetPromptParams{Name: "db__greet", Arguments: map[string]string{"name": "x"}}); err == nil {
		t.Errorf("db__greet got")
	}
	if _, err := lister.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "db__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "a"}}); err == nil {
		t.Errorf("db__greet completed")
	}
	dbAtRest("everything the lister can do")

	searcher := connect("Windsurf", "") // the current era: subscriptions/listen
	if surface := listedTools(t, searcher); surface[toolSearch] == nil {
		t.Fatalf("searcher's tools: %q, want the search surface", slices.Sorted(maps.Keys(surface)))
	}
	var found []string
	for _, q := range []map[string]any{{"query": "echo", "limit": 50}, {"query": "", "limit": 50}, {"query": "query", "backend": "db"}} {
		names, _ := searchFor(t, searcher, q)
		found = append(found, names...)
	}
	if len(found) == 0 {
		t.Errorf("search found nothing")
	}
	for _, name := range found {
		if strings.HasPrefix(name, "db__") {
			t.Errorf("search found %s", name)
		}
		callText(t, searcher, name, map[string]any{"text": "x"}) // found: in its list now
	}
	if _, err := searcher.CallTool(ctx, &mcp.CallToolParams{Name: toolCall, Arguments: map[string]any{"name": "db__query", "arguments": map[string]any{}}}); err == nil {
		t.Errorf("call_tool db__query: no error")
	}
	searcher.Subscribe(ctx, &mcp.SubscribeParams{URI: "fixture://db/res/1"}) // its answer: the era's for what does not exist
	subscribe(t, searcher, "fixture://fs/res/1")
	dbAtRest("everything the searcher can do")
	for _, name := range []string{"gh", "fs"} {
		if state, _ := stateOf(m, name); state != stateReady {
			t.Errorf("%s, used: %q", name, state)
		}
	}
}

// A profile with a mistake shows its agents nothing rather than more than
// meant, and the agent it was meant for (matched by clients) is told why
// in its instructions, where the user sees the tools missing. A clients
// written as a string, not a list, still finds its agents: they must not
// get everything instead.
func TestAProfileWithAMistakeTellsItsAgentWhy(t *testing.T) {
	for _, tc := range []struct{ name, body, why string }{
		{"a wrong type", "clients = [\"agent-p\"]\ntool_list_max = \"5\"\n", "mcp-mux.toml:10: profile.p.tool_list_max: expected an integer"},
		{"clients a string", "clients = \"agent-p\"\n", "mcp-mux.toml:9: profile.p.clients: expected a list of strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir() + "/mcp-mux.toml"
			src := backendTOML(t, "one") + "\n[profile.p]\n" + tc.body
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.LoadForServing(path)
			if err != nil {
				t.Fatal(err)
			}
			m := startMuxConfig(t, cfg)
			cs := agentNamed(t, m, "agent-p", nil)
			if tools := listedTools(t, cs); len(tools) != 0 {
				t.Errorf("the agent of a profile with a mistake sees %q, want nothing", slices.Sorted(maps.Keys(tools)))
			}
			instr := cs.InitializeResult().Instructions
			if !strings.Contains(instr, "Profile p shows nothing") || !strings.Contains(instr, tc.why) {
				t.Errorf("the instructions do not say profile p has the mistake %q:\n%s", tc.why, instr)
			}
		})
	}
}
