package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// End-to-end tests of what changes while the agent's session goes on: a
// slow backend arriving after the first list, and the config file being
// edited (hot reload).

// agent is mcp-mux run as runMux runs it, with a client that records the
// notifications mcp-mux sends it.
type agent struct {
	*running
	toolsChanged     chan struct{}
	resourcesChanged chan struct{}
	updated          chan string // URIs of notifications/resources/updated
}

func runAgent(t *testing.T, config string) *agent {
	t.Helper()
	a := &agent{
		toolsChanged:     make(chan struct{}, 100),
		resourcesChanged: make(chan struct{}, 100),
		updated:          make(chan string, 100),
	}
	w := startWire(t, config)
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { a.toolsChanged <- struct{}{} },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { a.resourcesChanged <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			a.updated <- r.Params.URI
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(w.out), Writer: nopClose{w.stdin}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, w.stderr)
	}
	t.Cleanup(func() { cs.Close() })
	a.running = &running{wire: w, cs: cs}
	return a
}

func (a *agent) toolNames(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var names []string
	for tool, err := range a.cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v\nstderr:\n%s", err, a.stderr)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// waitFor waits for one signal on ch.
func waitFor[T any](t *testing.T, a *agent, ch chan T, what string, d time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v\nstderr:\n%s", what, d, a.stderr)
	}
	var zero T
	return zero
}

// backendsStatus is mcp-mux://backends as the agent reads it.
type backendsStatus struct {
	Generation int       `json:"generation"`
	Loaded     time.Time `json:"loaded"`
	Backends   []struct {
		Name  string `json:"name"`
		State string `json:"state"`
		PID   int    `json:"pid"`
		Late  bool   `json:"late"`
	} `json:"backends"`
}

func (a *agent) status(t *testing.T) backendsStatus {
	t.Helper()
	res, err := a.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
	if err != nil {
		t.Fatal(err)
	}
	var s backendsStatus
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func hasPrefixed(names []string, prefix string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// TestFirstListDoesNotWaitForASlowBackend: a backend that takes 8 s to
// start does not hold the first tools/list (first_list_wait, 3 s by
// default); the list has the fast backend's tools, and list_changed comes
// when the slow one is ready, with its tools in the next list.
func TestFirstListDoesNotWaitForASlowBackend(t *testing.T) {
	cfg := testkit.WriteConfig(t, "",
		[]string{"slow", "-name", "slow", "-start-delay", "8s"},
		[]string{"fast", "-name", "fast"},
	)
	a := runAgent(t, cfg)
	start := time.Now()
	names := a.toolNames(t)
	took := time.Since(start)
	t.Logf("first tools/list took %v", took.Round(time.Millisecond))
	if took > 4*time.Second {
		t.Fatalf("first tools/list took %v, want about first_list_wait (3s)", took)
	}
	if !hasPrefixed(names, "fast__") || hasPrefixed(names, "slow__") {
		t.Fatalf("first list: want only fast's tools, got %v", names)
	}
	// The line is logged before the list is answered, but comes on
	// another pipe: it may reach us after the answer.
	testkit.Eventually(t, 5*time.Second, "the log to say which backend was late", func() bool {
		log := a.stderr.String()
		return strings.Contains(log, "late") && strings.Contains(log, "slow")
	})
	st := a.status(t)
	for _, b := range st.Backends {
		if b.Late != (b.Name == "slow") {
			t.Errorf("mcp-mux://backends: %s late=%v", b.Name, b.Late)
		}
	}
	waitFor(t, a, a.toolsChanged, "tools/list_changed", 15*time.Second)
	names = a.toolNames(t)
	if !hasPrefixed(names, "fast__") || !hasPrefixed(names, "slow__") {
		t.Fatalf("list after list_changed: want both backends' tools, got %v", names)
	}
}

// configText is a config whose backends run the fixture with args (the
// first element is the name); extra goes in [mux], lines after a "|" in a
// backend's args go in its [[backend]] table.
func configText(t testing.TB, extra string, backends ...[]string) string {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("[mux]\nshutdown_grace = \"1s\"\n" + extra + "\n")
	for _, args := range backends {
		var q, lines []string
		for i, a := range args[1:] {
			if a == "|" {
				lines = args[i+2:]
				break
			}
			q = append(q, strconv.Quote(a))
		}
		fmt.Fprintf(&sb, "[[backend]]\nname = %q\ncommand = %q\nargs = [%s]\n%s\n\n", args[0], testkit.FixtureBin(t), strings.Join(q, ", "), strings.Join(lines, "\n"))
	}
	return sb.String()
}

// saveByRename saves the config as editors do: a new file renamed over it.
func saveByRename(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp~"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// saveInPlace rewrites the config file itself (truncate and write).
func saveInPlace(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitStatus polls mcp-mux://backends until cond holds.
func (a *agent) waitStatus(t *testing.T, what string, cond func(backendsStatus) bool) backendsStatus {
	t.Helper()
	var st backendsStatus
	if !testkit.Poll(15*time.Second, func() bool { st = a.status(t); return cond(st) }) {
		t.Fatalf("timed out waiting for %s; mcp-mux://backends: %+v\nstderr:\n%s", what, st, a.stderr)
	}
	return st
}

// pids maps each ready backend to its pid.
func (s backendsStatus) pids() map[string]int {
	out := map[string]int{}
	for _, b := range s.Backends {
		if b.State == "ready" {
			out[b.Name] = b.PID
		}
	}
	return out
}

func allReady(n int) func(backendsStatus) bool {
	return func(s backendsStatus) bool { return len(s.pids()) == n && len(s.Backends) == n }
}

func (a *agent) subscribe(t *testing.T, uri string) {
	t.Helper()
	if err := a.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
}

func (a *agent) call(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	res, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v\nstderr:\n%s", tool, err, a.stderr)
	}
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("calling %s: tool error: %s", tool, sb.String())
	}
	return sb.String()
}

// expectUpdate makes backend's fixture send resources/updated for uri and
// waits for it to reach the agent.
func (a *agent) expectUpdate(t *testing.T, backend, uri string) {
	t.Helper()
	for len(a.updated) > 0 {
		<-a.updated
	}
	a.call(t, backend+"__update", map[string]any{"uri": uri})
	if got := waitFor(t, a, a.updated, "resources/updated for "+uri, 10*time.Second); got != uri {
		t.Fatalf("resources/updated for %s, want %s", got, uri)
	}
}

func (a *agent) subscriptions(t *testing.T) []map[string]any {
	t.Helper()
	res, err := a.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcp-mux://subscriptions"})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Subscriptions []map[string]any `json:"subscriptions"`
	}
	json.Unmarshal([]byte(res.Contents[0].Text), &v)
	return v.Subscriptions
}

// drain empties a notification channel.
func drain[T any](ch chan T) {
	for len(ch) > 0 {
		<-ch
	}
}

// TestReloadAddsABackend: a backend added to the file (saved in place)
// starts while the session goes on; its tools appear, announced with
// list_changed; the generation in mcp-mux://backends goes up.
func TestReloadAddsABackend(t *testing.T) {
	path := testkit.WriteRawConfig(t, configText(t, "", []string{"one", "-name", "one"}))
	a := runAgent(t, path)
	if names := a.toolNames(t); !hasPrefixed(names, "one__") {
		t.Fatalf("tools: %v", names)
	}
	st := a.waitStatus(t, "one ready", allReady(1))
	if st.Generation != 1 || st.Loaded.IsZero() {
		t.Fatalf("at start: generation %d loaded %v, want 1 and a time", st.Generation, st.Loaded)
	}
	pid := st.pids()["one"]

	saveInPlace(t, path, configText(t, "", []string{"one", "-name", "one"}, []string{"two", "-name", "two"}))
	waitFor(t, a, a.toolsChanged, "tools/list_changed after adding a backend", 15*time.Second)
	names := a.toolNames(t)
	if !hasPrefixed(names, "one__") || !hasPrefixed(names, "two__") {
		t.Fatalf("tools after the reload: %v", names)
	}
	st = a.waitStatus(t, "both ready", allReady(2))
	if st.Generation != 2 || !st.Loaded.After(time.Now().Add(-time.Minute)) {
		t.Errorf("after the reload: generation %d loaded %v, want 2 and the reload's time", st.Generation, st.Loaded)
	}
	if st.pids()["one"] != pid {
		t.Errorf("the unchanged backend was restarted: pid %d, was %d", st.pids()["one"], pid)
	}
}

// TestReloadRemovingABackendEndsItsSubscriptions: the session holds a
// subscription on a backend the new config removes: the subscription ends,
// the agent gets list_changed, the backend's process is gone, and the other
// backend's subscription keeps delivering.
func TestReloadRemovingABackendEndsItsSubscriptions(t *testing.T) {
	path := testkit.WriteRawConfig(t, configText(t, "", []string{"keep", "-name", "keep"}, []string{"gone", "-name", "gone"}))
	a := runAgent(t, path)
	a.toolNames(t)
	pids := a.waitStatus(t, "both ready", allReady(2)).pids()
	a.subscribe(t, "fixture://gone/res/1")
	a.subscribe(t, "fixture://keep/res/1")
	drain(a.toolsChanged)
	drain(a.resourcesChanged)

	saveByRename(t, path, configText(t, "", []string{"keep", "-name", "keep"}))
	waitFor(t, a, a.resourcesChanged, "resources/list_changed after removing a backend", 15*time.Second)
	waitFor(t, a, a.toolsChanged, "tools/list_changed after removing a backend", 5*time.Second)
	st := a.waitStatus(t, "one backend left", func(s backendsStatus) bool { return len(s.Backends) == 1 })
	if st.Backends[0].Name != "keep" || st.pids()["keep"] != pids["keep"] {
		t.Fatalf("after removing gone: %+v (keep's pid was %d)", st, pids["keep"])
	}
	waitGone(t, []int{pids["gone"]}, 5*time.Second)
	for _, s := range a.subscriptions(t) {
		if s["backend"] == "gone" {
			t.Errorf("subscription on the removed backend still held: %v", s)
		}
	}
	if names := a.toolNames(t); hasPrefixed(names, "gone__") {
		t.Errorf("the removed backend's tools are still listed: %v", names)
	}
	a.expectUpdate(t, "keep", "fixture://keep/res/1")
}

// TestReloadRestartsOnlyTheChangedBackend: a backend whose args changed
// restarts (new pid) with its subscription restored; the unchanged one
// keeps its process, and its subscription keeps delivering updates.
func TestReloadRestartsOnlyTheChangedBackend(t *testing.T) {
	path := testkit.WriteRawConfig(t, configText(t, "", []string{"same", "-name", "same"}, []string{"changed", "-name", "changed"}))
	a := runAgent(t, path)
	a.toolNames(t)
	before := a.waitStatus(t, "both ready", allReady(2)).pids()
	a.subscribe(t, "fixture://same/res/1")
	a.subscribe(t, "fixture://changed/res/1")

	saveByRename(t, path, configText(t, "", []string{"same", "-name", "same"}, []string{"changed", "-name", "changed", "-tools", "echo,extra"}))
	after := a.waitStatus(t, "changed restarted", func(s backendsStatus) bool {
		p := s.pids()
		return s.Generation == 2 && len(p) == 2 && p["changed"] != before["changed"]
	}).pids()
	if after["same"] != before["same"] {
		t.Errorf("the unchanged backend was restarted: pid %d, was %d", after["same"], before["same"])
	}
	waitGone(t, []int{before["changed"]}, 5*time.Second)
	if names := a.toolNames(t); !slices.Contains(names, "changed__extra") {
		t.Errorf("the restarted backend's new tool is not listed: %v", names)
	}
	a.expectUpdate(t, "same", "fixture://same/res/1")
	// The new process was subscribed anew, and delivers too.
	var s struct {
		Subscribe map[string]int `json:"subscribe"`
	}
	json.Unmarshal([]byte(a.call(t, "changed__stats", nil)), &s)
	if s.Subscribe["fixture://changed/res/1"] != 1 {
		t.Errorf("the restarted backend was not subscribed again: %v", s.Subscribe)
	}
	a.expectUpdate(t, "changed", "fixture://changed/res/1")
}

// TestReloadOfPrefixAndFiltersRestartsNothing: a new prefix and an
// exclude_tools apply at once to the running backend: names change, the
// filtered tool is gone, list_changed is sent, the pid stays.
func TestReloadOfPrefixAndFiltersRestartsNothing(t *testing.T) {
	path := testkit.WriteRawConfig(t, configText(t, "", []string{"fx", "-name", "fx"}))
	a := runAgent(t, path)
	if names := a.toolNames(t); !slices.Contains(names, "fx__echo") {
		t.Fatalf("tools: %v", names)
	}
	pid := a.waitStatus(t, "ready", allReady(1)).pids()["fx"]
	drain(a.toolsChanged)

	saveByRename(t, path, configText(t, "", []string{"fx", "-name", "fx", "|", `prefix = "renamed"`, `exclude_tools = ["echo"]`}))
	waitFor(t, a, a.toolsChanged, "tools/list_changed after a prefix change", 15*time.Second)
	names := a.toolNames(t)
	if hasPrefixed(names, "fx__") || !slices.Contains(names, "renamed__stats") || slices.Contains(names, "renamed__echo") {
		t.Fatalf("tools after the reload: %v", names)
	}
	if st := a.status(t); st.pids()["fx"] != pid || st.Generation != 2 {
		t.Errorf("after a prefix change: pid %d (was %d), generation %d", st.pids()["fx"], pid, st.Generation)
	}
	if got := a.call(t, "renamed__stats", nil); !strings.Contains(got, `"pid"`) {
		t.Errorf("renamed__stats: %s", got)
	}
}

// TestReloadOfAnInvalidConfigChangesNothing: a saved file with mistakes
// costs nothing that runs: a file that does not parse is not applied at
// all; a backend whose entry has mistakes keeps running with its previous
// settings, and a [mux] key with a mistake keeps its value. Every problem
// is logged on its own line.
func TestReloadOfAnInvalidConfigChangesNothing(t *testing.T) {
	good := configText(t, "", []string{"one", "-name", "one"})
	path := testkit.WriteRawConfig(t, good)
	a := runAgent(t, path)
	before := a.toolNames(t)
	pid := a.waitStatus(t, "ready", allReady(1)).pids()["one"]

	saveByRename(t, path, good+"\n[[backend]\n")
	if !testkit.Poll(10*time.Second, func() bool { return strings.Contains(a.stderr.String(), "not applied") }) {
		t.Fatalf("the file that does not parse was not logged:\n%s", a.stderr)
	}

	bad := configText(t, "request_timeout = \"soon\"", []string{"one", "-name", "one", "|", `restart = "always"`})
	saveByRename(t, path, bad)
	// Each problem is a line of its own, logged one after another: wait
	// for all of them, not for the first (CI once read the log between
	// the backend's line and its mistakes).
	wants := []string{"keeps running with its previous settings", "mux.request_timeout", "restart", "[mux] settings with mistakes keep their values"}
	missing := func() []string {
		log := a.stderr.String()
		return slices.DeleteFunc(slices.Clone(wants), func(w string) bool { return strings.Contains(log, w) })
	}
	if !testkit.Poll(10*time.Second, func() bool { return len(missing()) == 0 }) {
		t.Errorf("the log lacks %q:\n%s", missing(), a.stderr)
	}
	st := a.status(t)
	if len(st.Backends) != 1 || st.pids()["one"] != pid || st.Backends[0].State != "ready" {
		t.Errorf("after an invalid edit: %+v (pid was %d)", st, pid)
	}
	if after := a.toolNames(t); !slices.Equal(after, before) {
		t.Errorf("tools changed: %v, were %v", after, before)
	}
}

// TestSIGHUPReloadsAndKeepsTheSession: SIGHUP reads the config again (as
// daemons do) instead of ending the session. The edit goes through another
// hard link to the file, which the watcher (on the config's directory) does
// not see, so only the signal can apply it.
func TestSIGHUPReloadsAndKeepsTheSession(t *testing.T) {
	t.Run("in-process", sighupReloads)
	// The agent's process is the session's: the signal it gets reloads
	// the shared process.
	t.Run("shared", func(t *testing.T) {
		sharedDirs(t)
		sighupReloads(t)
	})
}

func sighupReloads(t *testing.T) {
	path := testkit.WriteRawConfig(t, configText(t, "", []string{"one", "-name", "one"}))
	other := filepath.Join(t.TempDir(), "link.toml")
	if err := os.Link(path, other); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	a := runAgent(t, path)
	a.toolNames(t)
	pid := a.waitStatus(t, "ready", allReady(1)).pids()["one"]

	saveInPlace(t, other, configText(t, "", []string{"one", "-name", "one"}, []string{"two", "-name", "two"}))
	testkit.Quiet(500 * time.Millisecond) // a reload for another file must not come (debounce 200 ms)
	if st := a.status(t); st.Generation > 1 {
		t.Fatalf("the watcher saw the edit through the other link (generation %d): the test proves nothing", st.Generation)
	}
	signalProcess(t, a.cmd.Process, syscall.SIGHUP)
	st := a.waitStatus(t, "two added by SIGHUP", allReady(2))
	if st.Generation != 2 || st.pids()["one"] != pid {
		t.Errorf("after SIGHUP: %+v (one's pid was %d)", st, pid)
	}
	select {
	case <-a.exited:
		t.Fatalf("mcp-mux exited on SIGHUP:\n%s", a.stderr)
	default:
	}
	if names := a.toolNames(t); !hasPrefixed(names, "two__") {
		t.Errorf("tools after SIGHUP: %v", names)
	}
}
