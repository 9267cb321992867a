package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/catalogmem"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Start when used (lazy.go): a remembered catalog is listed before its
// backend runs, the first use starts it, a changed catalog is announced,
// idle_stop stops and the next use starts again, and no secret reaches the
// memory's file.

// runWithMemory starts a mux over cfg that remembers catalogs in path.
func runWithMemory(t *testing.T, cfg *config.File, path string) *Mux {
	t.Helper()
	m := New(cfg, testLogger(t), "test")
	m.catalogs = catalogmem.Open(path)
	m.backoffBase = 10 * time.Millisecond
	m.Start()
	t.Cleanup(m.Close)
	return m
}

// learn runs cfg once, until every backend is ready, so that path
// remembers their catalogs, as taken for an agent of the go-sdk's default
// capabilities (roots), those of connect(t, m, nil).
func learn(t *testing.T, cfg *config.File, path string) {
	t.Helper()
	m := runWithMemory(t, cfg, path)
	connect(t, m, nil)
	for _, mem := range m.members() {
		testkit.Eventually(t, 20*time.Second, mem.spec.Name+" ready", mem.serving)
	}
	m.Close()
}

func stateOf(m *Mux, name string) (string, int) {
	for _, st := range m.Status() {
		if st.Name == name {
			return st.State, st.PID
		}
	}
	return "", 0
}

func TestARememberedCatalogIsListedBeforeTheBackendStarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	cfg := testConfig(fixture(t, "fx", "-rich", "-instructions", "Use fx for rich things."), fixture(t, "other"))
	cfg.Mux.ToolList = config.ToolListAll
	learn(t, cfg, path)

	m := runWithMemory(t, cfg, path)
	cs := connect(t, m, nil)
	tools := listedTools(t, cs)
	if tools["fx__rich"] == nil || tools["other__echo"] == nil || tools["fx__rich"].Annotations == nil || !tools["fx__rich"].Annotations.ReadOnlyHint {
		t.Fatalf("the first list is not the remembered catalog, whole: %v", keys(tools))
	}
	for _, name := range []string{"fx", "other"} {
		if state, pid := stateOf(m, name); state != stateRemembered || pid != 0 {
			t.Errorf("%s: state %q pid %d after the first list: want remembered, not started", name, state, pid)
		}
	}
	if instr := cs.InitializeResult().Instructions; !strings.Contains(instr, "Use fx for rich things.") {
		t.Errorf("the remembered instructions are not in the first initialize: %q", instr)
	}
	// The first use starts it, and the call gets what a running backend
	// gives; the other backend stays at rest.
	if got := callText(t, cs, "fx__echo", map[string]any{"text": "woke"}); !strings.Contains(got, "woke") {
		t.Errorf("fx__echo: %q", got)
	}
	if state, pid := stateOf(m, "fx"); state != stateReady || pid == 0 {
		t.Errorf("fx after its first use: %q pid %d", state, pid)
	}
	if state, _ := stateOf(m, "other"); state != stateRemembered {
		t.Errorf("other, never used: %q", state)
	}
	// A read of a remembered resource starts its backend too.
	res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: "fixture://other/res/1"})
	if err != nil || len(res.Contents) == 0 {
		t.Fatalf("read: %v", err)
	}
	if state, _ := stateOf(m, "other"); state != stateReady {
		t.Errorf("other after a read: %q", state)
	}
}

// The resources of a backend at rest are listed from memory, and a
// subscription starts it.
func TestABackendAtRestListsItsResourcesAndASubscriptionStartsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	cfg := testConfig(fixture(t, "fx"))
	learn(t, cfg, path)
	m := runWithMemory(t, cfg, path)
	cs := connect(t, m, nil)
	res, err := cs.ListResources(testkit.CtxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	if !strings.Contains(strings.Join(uris, " "), "fixture://fx/res/1") {
		t.Fatalf("resources of fx at rest: %v", uris)
	}
	if state, _ := stateOf(m, "fx"); state != stateRemembered {
		t.Fatalf("listing started fx: %q", state)
	}
	if err := cs.Subscribe(testkit.CtxT(t), &mcp.SubscribeParams{URI: "fixture://fx/res/1"}); err != nil {
		t.Fatal(err)
	}
	if state, _ := stateOf(m, "fx"); state != stateReady {
		t.Errorf("fx after a subscribe: %q", state)
	}
}

// What a backend lists when it starts and what was remembered differ: the
// catalog follows the backend and the agent is told.
func TestAChangedCatalogSendsListChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	cfg := testConfig(fixture(t, "fx"))
	learn(t, cfg, path)
	// As if it had a tool last time that it no longer has.
	store := catalogmem.Open(path)
	id := here(t, cfg.Backends[0])
	e, ok := store.Lookup(id)
	if !ok {
		t.Fatal("nothing remembered of fx")
	}
	e.Tools = append(e.Tools, json.RawMessage(`{"name":"ghost","inputSchema":{"type":"object"}}`))
	if _, err := store.Put(id, e); err != nil {
		t.Fatal(err)
	}

	changed := make(chan struct{}, 10)
	m := runWithMemory(t, cfg, path)
	cs := connect(t, m, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	if tools := listedTools(t, cs); tools["fx__ghost"] == nil {
		t.Fatalf("the remembered ghost is not listed: %v", keys(tools))
	}
	callText(t, cs, "fx__echo", map[string]any{"text": "x"})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after the backend listed something else")
	}
	if tools := listedTools(t, cs); tools["fx__ghost"] != nil || tools["fx__echo"] == nil {
		t.Errorf("after the start, the list is %v", keys(tools))
	}
	// The memory follows (written apart): the next run lists what the
	// backend listed.
	testkit.Eventually(t, 10*time.Second, "the memory without the ghost", func() bool {
		e, _ := catalogmem.Open(path).Lookup(id)
		return !strings.Contains(string(mustJSON(t, e.Tools)), "ghost")
	})
}

// An unchanged catalog is no news: no list_changed when the backend starts.
func TestAnUnchangedCatalogIsNotAnnounced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	cfg := testConfig(fixture(t, "fx"))
	learn(t, cfg, path)
	changed := make(chan struct{}, 10)
	m := runWithMemory(t, cfg, path)
	cs := connect(t, m, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	listedTools(t, cs)
	callText(t, cs, "fx__echo", map[string]any{"text": "x"})
	// A notification sent by the start would precede this call's answer
	// on the same connection: a second round trip flushes it.
	callText(t, cs, "fx__echo", map[string]any{"text": "y"})
	select {
	case <-changed:
		t.Error("tools/list_changed after a start that listed what was remembered")
	default:
	}
}

func TestIdleStopStopsABackendAndTheNextUseStartsIt(t *testing.T) {
	cfg := testConfig(fixture(t, "fx"))
	cfg.Mux.IdleStop.Duration = 300 * time.Millisecond
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)
	callText(t, cs, "fx__echo", map[string]any{"text": "one"})
	_, pid := stateOf(m, "fx")
	testkit.Eventually(t, 10*time.Second, "fx stopped for idleness", func() bool {
		state, _ := stateOf(m, "fx")
		return state == stateIdle
	})
	if tools := listedTools(t, cs); tools["fx__echo"] == nil {
		t.Fatalf("an idle backend's tools are not listed: %v", keys(tools))
	}
	if got := callText(t, cs, "fx__echo", map[string]any{"text": "two"}); !strings.Contains(got, "two") {
		t.Errorf("the call after the idle stop: %q", got)
	}
	if state, pid2 := stateOf(m, "fx"); state != stateReady || pid2 == pid || pid2 == 0 {
		t.Errorf("after the idle stop and a call: %q pid %d (was %d)", state, pid2, pid)
	}
}

// A subscription keeps a backend from being idle.
func TestASubscriptionKeepsABackendFromIdling(t *testing.T) {
	cfg := testConfig(fixture(t, "fx"))
	cfg.Mux.IdleStop.Duration = 200 * time.Millisecond
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)
	if err := cs.Subscribe(testkit.CtxT(t), &mcp.SubscribeParams{URI: "fixture://fx/res/1"}); err != nil {
		t.Fatal(err)
	}
	// Five idle_stops pass, each checked, and it stays.
	mem := m.members()[0]
	from := mem.idleChecks.Load()
	testkit.Eventually(t, 10*time.Second, "20 idle checks (five idle_stops)", func() bool { return mem.idleChecks.Load() >= from+20 })
	if state, _ := stateOf(m, "fx"); state != stateReady {
		t.Fatalf("fx with a subscription went %q", state)
	}
}

// start = "lazy": a backend never seen starts to learn its catalog, then
// stops until used.
func TestLazyStartStopsABackendOnceItsCatalogIsKnown(t *testing.T) {
	cfg := testConfig(fixture(t, "fx"))
	cfg.Mux.Start = config.StartLazy
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)
	if tools := listedTools(t, cs); tools["fx__echo"] == nil {
		t.Fatalf("lazy: the first list lacks fx: %v", keys(tools))
	}
	testkit.Eventually(t, 10*time.Second, "fx at rest once its catalog is known", func() bool {
		state, _ := stateOf(m, "fx")
		return state == stateIdle
	})
	callText(t, cs, "fx__echo", map[string]any{"text": "x"})
	if state, _ := stateOf(m, "fx"); state != stateReady {
		t.Errorf("after a call: %q", state)
	}
}

// start = "eager" starts a remembered backend at once.
func TestEagerStartsARememberedBackendAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	cfg := testConfig(fixture(t, "fx"))
	learn(t, cfg, path)
	cfg.Backends[0].Start = config.StartEager
	m := runWithMemory(t, cfg, path)
	testkit.Eventually(t, 20*time.Second, "fx started", func() bool {
		state, pid := stateOf(m, "fx")
		return state == stateReady && pid != 0
	})
}

// The memory's files hold no env or header value: they reach their names
// (the key) as hashes only.
func TestTheCatalogMemoryHoldsNoSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	b := fixture(t, "fx")
	b.Env = map[string]string{"FX_TOKEN": "s3cret-env-value-4242"}
	learn(t, testConfig(b), path)
	files, err := filepath.Glob(filepath.Join(path, "*"))
	if err != nil || len(files) != 2 {
		t.Fatalf("the memory holds %v (%v), want fx's two files (this directory's and any directory's)", files, err)
	}
	for _, f := range files {
		if strings.Contains(f, "s3cret-env-value-4242") {
			t.Error("the env value names the memory's file")
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "echo") {
			t.Fatalf("the file does not hold fx's catalog:\n%.300s", data)
		}
		if strings.Contains(string(data), "s3cret-env-value-4242") {
			t.Error("the env value is in the memory's file")
		}
	}
	// A new value is another backend: nothing remembered of it.
	b.Env["FX_TOKEN"] = "another"
	if _, ok := catalogmem.Open(path).Lookup(here(t, b)); ok {
		t.Error("a backend with another env value found the first one's catalog")
	}
}

// here is what s is remembered under by a Mux of this test, which runs
// where the test does.
func here(t *testing.T, s config.Backend) catalogmem.Identity {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return identityOf(s, wd)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A remembered backend that fails when its use starts it: the request gets
// the failure, at once, not a wait for startup_timeout.
func TestARememberedBackendThatFailsToStartSaysWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	good := testConfig(fixture(t, "fx"))
	learn(t, good, path)
	// The same backend (as the memory knows it) now fails at start.
	bad := fixture(t, "fx", "-fail-start")
	bad.Restart = config.RestartNever
	store := catalogmem.Open(path)
	e, _ := store.Lookup(here(t, good.Backends[0]))
	if _, err := store.Put(here(t, bad), e); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(bad)
	cfg.Mux.StartupTimeout.Duration = time.Minute
	m := runWithMemory(t, cfg, path)
	cs := connect(t, m, nil)
	if tools := listedTools(t, cs); tools["fx__echo"] == nil {
		t.Fatalf("not listed from memory: %v", keys(tools))
	}
	start := time.Now()
	_, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": "x"}})
	if err == nil || !strings.Contains(err.Error(), "failing on purpose") {
		t.Fatalf("a call to a backend that fails at start: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the failure took %v: it waited for startup_timeout", d)
	}
}

// A request that waits for its backend to start hears that it waits, as
// a log message if it asked for them; its progress token carries only the
// backend's own progress, as a direct connection does: values on a token
// must increase, and mcp-mux's count of seconds and the backend's steps
// have nothing in common.
func TestARequestThatStartsItsBackendGetsTheBackendsProgressAndHearsItWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	cfg := testConfig(fixture(t, "slow", "-start-delay", "1500ms"))
	learn(t, cfg, path)
	m := runWithMemory(t, cfg, path)
	var mu sync.Mutex
	var progress []float64
	var logs []string
	cs := connect(t, m, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if r.Params.ProgressToken == "wake" {
				mu.Lock()
				progress = append(progress, r.Params.Progress)
				mu.Unlock()
			}
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			if r.Params.Logger == "mcp-mux" {
				mu.Lock()
				logs = append(logs, fmt.Sprint(r.Params.Data))
				mu.Unlock()
			}
		},
	})
	if err := cs.SetLoggingLevel(testkit.CtxT(t), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	p := &mcp.CallToolParams{Name: "slow__progress", Arguments: map[string]any{"steps": 3, "delay_ms": 20}}
	p.SetProgressToken("wake")
	if _, err := cs.CallTool(testkit.CtxT(t), p); err != nil {
		t.Fatal(err)
	}
	// What came before the response has been handled by now.
	testkit.Eventually(t, 5*time.Second, "the backend's three steps", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) >= 3
	})
	mu.Lock()
	if !slices.Equal(progress, []float64{1, 2, 3}) {
		t.Errorf("progress under the call's token: %v, want the backend's own: [1 2 3]", progress)
	}
	mu.Unlock()
	testkit.Eventually(t, 5*time.Second, "a log message while slow starts", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(logs) > 0 && strings.Contains(logs[0], `waiting for backend "slow" to start`)
	})
}
