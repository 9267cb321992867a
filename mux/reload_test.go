package mux

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// backendTOML is a [[backend]] running the fixture named name, with more
// lines of its table after.
func backendTOML(t testing.TB, name string, lines ...string) string {
	t.Helper()
	return fmt.Sprintf("[[backend]]\nname = %q\ncommand = %q\nargs = [\"-name\", %q]\n%s\n\n", name, testkit.FixtureBin(t), name, strings.Join(lines, "\n"))
}

func parseTOML(t *testing.T, text string) *config.File {
	t.Helper()
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "mcp-mux.toml"), []byte(text), nil)
	if err != nil {
		t.Fatalf("config:\n%s\n%v", text, err)
	}
	return cfg
}

func TestDiffConfigSortsEachBackendIntoOneChange(t *testing.T) {
	old := parseTOML(t, backendTOML(t, "same")+
		backendTOML(t, "args")+
		backendTOML(t, "env", `env = { A = "1" }`)+
		backendTOML(t, "timeout")+
		backendTOML(t, "prefix")+
		backendTOML(t, "filter")+
		backendTOML(t, "gone")+
		backendTOML(t, "disabled", "disabled = true")+
		backendTOML(t, "spelled", `prefix = "spelled"`))
	next := parseTOML(t, backendTOML(t, "same")+
		strings.Replace(backendTOML(t, "args"), `"-name", "args"`, `"-name", "args", "-tools", "x"`, 1)+
		backendTOML(t, "env", `env = { A = "2" }`)+
		backendTOML(t, "timeout", `request_timeout = "5s"`)+
		backendTOML(t, "prefix", `prefix = "p"`)+
		backendTOML(t, "filter", `exclude_tools = ["echo"]`)+
		backendTOML(t, "disabled")+
		backendTOML(t, "new")+
		backendTOML(t, "spelled"))
	p := diffConfig(old, next)
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	check("add", p.add, []string{"disabled", "new"})
	check("remove", p.remove, []string{"gone"})
	check("restart", p.restart, []string{"args", "env", "timeout"})
	check("expose", p.expose, []string{"prefix", "filter"})
	if p.reorder || len(p.live)+len(p.needsRestart) > 0 || !p.changes() {
		t.Errorf("plan: %+v", p)
	}
}

func TestDiffConfigOfAnEquivalentFileChangesNothing(t *testing.T) {
	text := "[mux]\nlog_level = \"info\"\n" + backendTOML(t, "a", `env = {}`) + backendTOML(t, "b")
	// The defaults written out, an empty table for a missing one.
	same := "[mux]\nrequest_timeout = \"60s\"\n" + backendTOML(t, "a", `prefix = "a"`) + backendTOML(t, "b")
	if p := diffConfig(parseTOML(t, text), parseTOML(t, same)); p.changes() || len(p.needsRestart) > 0 {
		t.Errorf("plan: %+v", p)
	}
}

func TestDiffConfigSeesANewPrecedenceOrder(t *testing.T) {
	p := diffConfig(parseTOML(t, backendTOML(t, "a")+backendTOML(t, "b")+backendTOML(t, "c")),
		parseTOML(t, backendTOML(t, "c")+backendTOML(t, "b")))
	if !p.reorder || !slices.Equal(p.remove, []string{"a"}) || len(p.add)+len(p.restart)+len(p.expose) > 0 {
		t.Errorf("plan: %+v", p)
	}
	p = diffConfig(parseTOML(t, backendTOML(t, "a")+backendTOML(t, "b")), parseTOML(t, backendTOML(t, "new")+backendTOML(t, "a")+backendTOML(t, "b")))
	if p.reorder {
		t.Errorf("adding a backend first is not a new order of the others: %+v", p)
	}
}

func TestDiffConfigSortsMuxSettingsIntoLiveAndNeedsRestart(t *testing.T) {
	old := parseTOML(t, "[mux]\n"+backendTOML(t, "a"))
	next := parseTOML(t, `[mux]
name = "other"
log_level = "debug"
request_timeout = "5s"
first_list_wait = "1s"
tool_separator = "."
instructions = "hi"
max_subscriptions = 5
`+backendTOML(t, "a"))
	p := diffConfig(old, next)
	if want := []string{"log_level", "request_timeout", "first_list_wait"}; !slices.Equal(p.live, want) {
		t.Errorf("live: %q, want %q", p.live, want)
	}
	if want := []string{"name", "max_subscriptions", "tool_separator", "instructions"}; !slices.Equal(p.needsRestart, want) {
		t.Errorf("needs restart: %q, want %q", p.needsRestart, want)
	}
}

// The HTTP door takes the tokens it started with: a [[token]] saved in,
// out or changed says it needs a restart.
func TestDiffConfigTokensNeedARestart(t *testing.T) {
	t.Setenv("MUX_TEST_BOB", "bob-key-0123456789")
	old := parseTOML(t, backendTOML(t, "a"))
	next := parseTOML(t, backendTOML(t, "a")+"[[token]]\nname = \"bob\"\nvalue = \"${MUX_TEST_BOB}\"\n")
	if p := diffConfig(old, next); !slices.Equal(p.needsRestart, []string{"[[token]]"}) {
		t.Errorf("needs restart: %q, want [[token]]", p.needsRestart)
	}
	if p := diffConfig(next, next); len(p.needsRestart) > 0 {
		t.Errorf("the same tokens need a restart: %q", p.needsRestart)
	}
}

func TestFirstListWaitDefaultsToThreeSeconds(t *testing.T) {
	if got := parseTOML(t, backendTOML(t, "a")).Mux.FirstListWait.Duration; got != 3*time.Second {
		t.Errorf("first_list_wait default: %v", got)
	}
	if got := parseTOML(t, "[mux]\nfirst_list_wait = \"500ms\"\n"+backendTOML(t, "a")).Mux.FirstListWait.Duration; got != 500*time.Millisecond {
		t.Errorf("first_list_wait: %v", got)
	}
}

// reloadable is a mux serving the config file it reloads, with its log.
type reloadable struct {
	*Mux
	path string
	log  *testkit.SyncBuffer
}

func startReloadable(t *testing.T, text string) *reloadable {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	writeFile(t, path, text)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	lg := &testkit.SyncBuffer{}
	logger := log.New(lg)
	logger.SetLevel(log.DebugLevel)
	m := New(cfg, logger, "test")
	m.backoffBase = 10 * time.Millisecond
	m.Start()
	t.Cleanup(m.Close)
	return &reloadable{m, path, lg}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *reloadable) generation() int { return r.conf.Load().generation }

// TestReloadAppliesLiveSettingsAndLogsTheOthers: request_timeout and
// log_level change at once; name cannot, and the log says so.
func TestReloadAppliesLiveSettingsAndLogsTheOthers(t *testing.T) {
	r := startReloadable(t, "[mux]\nlog_level = \"debug\"\n"+backendTOML(t, "a"))
	writeFile(t, r.path, "[mux]\nlog_level = \"warn\"\nrequest_timeout = \"7s\"\nname = \"renamed\"\n"+backendTOML(t, "a"))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := r.settings().RequestTimeout.Duration; got != 7*time.Second {
		t.Errorf("request_timeout after the reload: %v", got)
	}
	if got := r.requestTimeout(r.members()[0]); got != 7*time.Second {
		t.Errorf("a backend's request timeout after the reload: %v", got)
	}
	if r.Mux.log.GetLevel() != log.WarnLevel || r.members()[0].log.GetLevel() != log.WarnLevel {
		t.Errorf("log level after the reload: %v, backend's %v", r.Mux.log.GetLevel(), r.members()[0].log.GetLevel())
	}
	if r.settings().Name != "mcp-mux" || r.cfg.Mux.Name != "mcp-mux" {
		t.Errorf("name changed live: %q", r.settings().Name)
	}
	if !strings.Contains(r.log.String(), "needs restart: name") {
		t.Errorf("the log does not say name needs a restart:\n%s", r.log)
	}
	if r.generation() != 2 {
		t.Errorf("generation %d, want 2", r.generation())
	}
}

// TestWatcherDebouncesABurstOfWrites: several saves in quick succession
// are one reload, applied by the watcher on its own.
func TestWatcherDebouncesABurstOfWrites(t *testing.T) {
	r := startReloadable(t, backendTOML(t, "a"))
	if err := r.WatchConfig(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		writeFile(t, r.path, fmt.Sprintf("[mux]\nrequest_timeout = \"%ds\"\n", 10+i)+backendTOML(t, "a"))
		// Pacing, not a wait: saves an editor makes in quick succession.
		// Any gap under reloadDebounce makes them one burst, so a shorter
		// sleep checks the same; a longer one (a stalled machine) makes
		// two bursts, and the test fails rather than passes.
		time.Sleep(30 * time.Millisecond)
	}
	testkit.Eventually(t, 5*time.Second, "the reload", func() bool { return r.generation() == 2 })
	testkit.Quiet(2 * reloadDebounce) // no second reload may follow: it would within one debounce
	if g := r.generation(); g != 2 || r.settings().RequestTimeout.Duration != 14*time.Second {
		t.Errorf("after a burst of 5 saves: generation %d, request_timeout %v; want 2 and the last save's 14s", g, r.settings().RequestTimeout.Duration)
	}
}

// TestCloseStopsTheWatcher: Close returns promptly with the watcher running
// (it waits for every goroutine it owns), and a save after it does nothing.
func TestCloseStopsTheWatcher(t *testing.T) {
	r := startReloadable(t, backendTOML(t, "a"))
	if err := r.WatchConfig(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with the watcher running")
	}
	writeFile(t, r.path, backendTOML(t, "b"))
	testkit.Quiet(2 * reloadDebounce) // no reload may come after Close: it would within one debounce
	if r.generation() != 1 {
		t.Errorf("a reload after Close: generation %d", r.generation())
	}
	if err := r.Reload(); err == nil {
		t.Error("Reload after Close: no error")
	}
}

// TestReloadWhileServingIsRaceFree: lists, calls and reads go on while
// reloads add, remove, reorder and rename backends (run with -race); each
// answer is whole, and the last config is what is served.
func TestReloadWhileServingIsRaceFree(t *testing.T) {
	configs := []string{
		backendTOML(t, "a") + backendTOML(t, "b"),
		backendTOML(t, "b") + backendTOML(t, "a", `prefix = "x"`),
		backendTOML(t, "a", `exclude_tools = ["echo"]`) + backendTOML(t, "c"),
		backendTOML(t, "c") + backendTOML(t, "a"),
	}
	r := startReloadable(t, configs[0])
	cs := connect(t, r.Mux, nil)
	toolNames(t, cs)
	ctx, cancel := context.WithCancel(testkit.CtxT(t))
	var wg sync.WaitGroup
	// reloads counts the reloads done; each worker records in rounds the
	// count its last whole round began under.
	var reloads atomic.Int64
	var rounds [3]atomic.Int64
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				began := reloads.Load()
				for _, err := range cs.Tools(ctx, nil) {
					if err != nil && ctx.Err() == nil {
						t.Errorf("tools/list during reloads: %v", err)
					}
				}
				cs.ListResources(ctx, nil)
				cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uriBackends})
				// It may be gone or starting: only a crash would matter.
				cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{"text": "x"}})
				rounds[w].Store(began)
			}
		}()
	}
	for i := 1; i <= 8; i++ {
		writeFile(t, r.path, configs[i%len(configs)])
		if err := r.Reload(); err != nil {
			t.Fatal(err)
		}
		reloads.Store(int64(i))
		// Each worker serves a whole round under this config (its
		// backends starting, stopping, renamed) before the next reload.
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("a round of requests by each worker after reload %d", i), func() bool {
			for w := range rounds {
				if rounds[w].Load() < int64(i) {
					return false
				}
			}
			return true
		})
	}
	cancel()
	wg.Wait()
	testkit.Eventually(t, 10*time.Second, "the last config's backends ready", func() bool {
		st := r.Status()
		return len(st) == 2 && st[0].Name == "a" && st[1].Name == "b" && st[0].Ready() && st[1].Ready()
	})
	// A backend is ready a moment before its tools are in the merged
	// list (the list_changed that follows says so): the list comes to
	// hold the last config's tools, and only those.
	var names []string
	if !testkit.Poll(10*time.Second, func() bool {
		names = toolNames(t, cs)
		return slices.Contains(names, "a__echo") && slices.Contains(names, "b__echo") && !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "c__") || strings.HasPrefix(n, "x__") })
	}) {
		t.Errorf("tools after the last reload: %v", names)
	}
}

// The sharing knobs are read when the shared mcp-mux starts: a reload
// that changes them restarts no backend and says they need a restart.
func TestDiffConfigSharingKnobsNeedARestart(t *testing.T) {
	old := parseTOML(t, backendTOML(t, "a")+backendTOML(t, "b"))
	next := parseTOML(t, "[mux]\nshared = false\nshared_linger = \"1m\"\n"+backendTOML(t, "a", `share = "never"`)+backendTOML(t, "b"))
	p := diffConfig(old, next)
	if len(p.restart)+len(p.add)+len(p.remove)+len(p.expose) > 0 {
		t.Errorf("backends changed: %+v", p)
	}
	if want := []string{"shared", "shared_linger", `share of backend "a"`}; !slices.Equal(p.needsRestart, want) {
		t.Errorf("needs restart: %q, want %q", p.needsRestart, want)
	}
}
