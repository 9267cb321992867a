package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/catalogmem"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// What a remembered catalog shows must be true: a name it lacks is
// unknown, a backend that cannot start leaves the lists, and what is not
// known of a backend at rest is not said.

// A typo under the prefix of a backend at rest is an unknown tool, as it
// is for the same backend running: its catalog is known, and lacks it.
func TestATypoUnderARememberedBackendIsAnUnknownTool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	cfg := testConfig(fixture(t, "fx"))
	learn(t, cfg, path)
	m := runWithMemory(t, cfg, path)
	cs := connect(t, m, nil)
	typo := &mcp.CallToolParams{Name: "fx__echp", Arguments: map[string]any{"text": "x"}}
	_, err := cs.CallTool(testkit.CtxT(t), typo)
	atRest := rpcCode(t, err)
	if state, _ := stateOf(m, "fx"); state != stateRemembered {
		t.Fatalf("fx is %q after a call to a name it lacks: want it still at rest", state)
	}
	callText(t, cs, "fx__echo", map[string]any{"text": "wake"})
	_, err = cs.CallTool(testkit.CtxT(t), typo)
	running := rpcCode(t, err)
	if atRest.Code != running.Code || atRest.Message != running.Message {
		t.Errorf("at rest: %d %q\nrunning: %d %q\nwant the same error", atRest.Code, atRest.Message, running.Code, running.Message)
	}
}

// rememberAs makes path remember, for the backend spec, what it remembers
// of the backend learned: spec is the same backend, started otherwise.
func rememberAs(t *testing.T, path string, learned, spec config.Backend) {
	t.Helper()
	store := catalogmem.Open(path)
	e, ok := store.Lookup(here(t, learned))
	if !ok {
		t.Fatalf("nothing remembered of %s", learned.Name)
	}
	if _, err := store.Put(here(t, spec), e); err != nil {
		t.Fatal(err)
	}
}

// toolsChanged is client options that count the tools/list_changed the
// agent receives.
func toolsChanged(n *atomic.Int32) *mcp.ClientOptions {
	return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { n.Add(1) }}
}

// A remembered backend whose start fails leaves the lists, as a running
// one that goes down does, while it is restarted; it comes back, with
// list_changed, once a start works.
func TestARememberedBackendThatCannotStartLeavesTheListsUntilItStarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	good := testConfig(fixture(t, "fx"))
	learn(t, good, path)
	broken := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(broken, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := fixture(t, "fx", "-fail-start-while", broken)
	rememberAs(t, path, good.Backends[0], bad)
	cfg := testConfig(bad)
	cfg.Mux.RestartMax = 1000 // restarting, never given up
	m := runWithMemory(t, cfg, path)
	var changed atomic.Int32
	cs := connect(t, m, toolsChanged(&changed))
	if tools := listedTools(t, cs); tools["fx__echo"] == nil {
		t.Fatalf("not listed from memory: %v", keys(tools))
	}
	if _, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Fatal("a call to a backend that cannot start succeeded")
	}
	testkit.Eventually(t, 10*time.Second, "tools/list_changed once fx cannot start", func() bool { return changed.Load() >= 1 })
	if state, _ := stateOf(m, "fx"); state != stateRestarting {
		t.Errorf("fx is %q, want restarting", state)
	}
	if tools := listedTools(t, cs); tools["fx__echo"] != nil {
		t.Errorf("fx, restarting after its start failed, is still listed: %v", keys(tools))
	}
	before := changed.Load()
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "fx listed again, with tools/list_changed, once it starts", func() bool {
		return changed.Load() > before && listedTools(t, cs)["fx__echo"] != nil
	})
}

// A remembered backend given up after too many failed starts is not
// listed; the memory keeps why (without the secret the error quoted), so
// that check does not say it starts when first used, and the next run
// starts it at once rather than list from memory what last failed.
func TestARememberedBackendGivenUpLeavesTheListsAndTheMemorySaysWhy(t *testing.T) {
	const secret = "s3cret-token-value-4242"
	path := filepath.Join(t.TempDir(), "catalogs")
	good := testConfig(fixture(t, "fx"))
	learn(t, good, path)
	bad := fixture(t, "fx", "-fail-start", "-fail-says", "FX_TOKEN")
	bad.Env = map[string]string{"FX_TOKEN": secret}
	rememberAs(t, path, good.Backends[0], bad)
	cfg := testConfig(bad, fixture(t, "other"))
	m := runWithMemory(t, cfg, path)
	var changed atomic.Int32
	cs := connect(t, m, toolsChanged(&changed))
	if tools := listedTools(t, cs); tools["fx__echo"] == nil {
		t.Fatalf("not listed from memory: %v", keys(tools))
	}
	if _, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Fatal("a call to a backend that cannot start succeeded")
	}
	testkit.Eventually(t, 10*time.Second, "fx failed, and tools/list_changed", func() bool {
		state, _ := stateOf(m, "fx")
		return state == stateFailed && changed.Load() >= 1
	})
	if tools := listedTools(t, cs); tools["fx__echo"] != nil || tools["other__echo"] == nil {
		t.Errorf("with fx given up, the list is %v", keys(tools))
	}
	m.Close()

	t.Setenv(CatalogsEnv, path)
	plans := StartPlans(cfg)
	if len(plans) != 2 || plans[0].LastFailure == nil || !strings.Contains(plans[0].LastFailure.Reason, "failing on purpose") ||
		time.Since(plans[0].LastFailure.At) > time.Minute {
		t.Fatalf("check's plan for fx: %+v, want its last failure", plans[0])
	}
	if plans[1].LastFailure != nil {
		t.Errorf("check's plan for other, which started: %+v", plans[1])
	}
	files, _ := filepath.Glob(filepath.Join(path, "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), secret) {
			t.Errorf("%s holds the env value the error quoted:\n%s", f, data)
		}
	}

	// The next run does not list from memory what last failed to start.
	m = runWithMemory(t, cfg, path)
	cs = connect(t, m, nil)
	if tools := listedTools(t, cs); tools["fx__echo"] != nil || tools["other__echo"] == nil {
		t.Errorf("the next run lists %v", keys(tools))
	}
	if state, _ := stateOf(m, "fx"); state == stateRemembered {
		t.Error("the next run put fx, which last failed to start, at rest")
	}
}

// backendsDoc is mcp-mux://backends as read on cs: each backend's fields
// as JSON has them, so that null and false differ.
func backendsDoc(t *testing.T, cs *mcp.ClientSession) map[string]map[string]any {
	t.Helper()
	res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: uriBackends})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Backends []map[string]any }
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, b := range doc.Backends {
		out[b["name"].(string)] = b
	}
	return out
}

// mcp-mux://backends shows what is remembered of a backend at rest's
// capabilities, and of one never seen running says they are unknown,
// not that it cannot.
func TestTheBackendsResourceShowsRememberedCapabilities(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	learn(t, testConfig(fixture(t, "fx")), path)
	never := fixture(t, "never", "-fail-start")
	never.Restart = config.RestartNever
	m := runWithMemory(t, testConfig(fixture(t, "fx"), never), path)
	cs := connect(t, m, nil)
	testkit.Eventually(t, 10*time.Second, "never failed", func() bool {
		state, _ := stateOf(m, "never")
		return state == stateFailed
	})
	doc := backendsDoc(t, cs)
	fx := doc["fx"]
	if fx["state"] != stateRemembered || fx["subscribe"] != true || fx["capabilities_from"] != "last seen" {
		t.Errorf("fx at rest: %v, want its remembered subscribe (true), from when last seen", fx)
	}
	if lc, _ := fx["list_changed"].([]any); len(lc) != 3 {
		t.Errorf("fx at rest: list_changed %v, want the three it advertised", fx["list_changed"])
	}
	if fx["server"] != "fx 0.0.1" {
		t.Errorf("fx at rest: server %v", fx["server"])
	}
	n := doc["never"]
	if n["subscribe"] != nil || n["list_changed"] != nil || n["capabilities_from"] != "unknown" {
		t.Errorf("never, which never initialized: %v, want its capabilities unknown (null)", n)
	}
}

// The metrics tell a backend at rest from a failed one: each backend has
// one mcp_mux_backend_state series per state, 1 for the one it is in.
func TestMetricsTellABackendAtRestFromAFailedOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	learn(t, testConfig(fixture(t, "fx")), path)
	never := fixture(t, "never", "-fail-start")
	never.Restart = config.RestartNever
	m := runWithMemory(t, testConfig(fixture(t, "fx"), never), path)
	url := strings.TrimSuffix(serveHTTP(t, m, door.HTTPOptions{}), door.HTTPPath) + MetricsPath
	testkit.Eventually(t, 10*time.Second, "never failed", func() bool {
		state, _ := stateOf(m, "never")
		return state == stateFailed
	})
	fams := scrape(t, url, "")
	for _, c := range []struct{ backend, state string }{{"fx", stateRemembered}, {"never", stateFailed}} {
		for _, state := range backendStates {
			want := 0.0
			if state == c.state {
				want = 1
			}
			if got := sample(fams, "mcp_mux_backend_state", "backend", c.backend, "state", state); got != want {
				t.Errorf("mcp_mux_backend_state{backend=%q,state=%q} = %v, want %v", c.backend, state, got, want)
			}
		}
		// up stays what it says: ready or not.
		if got := sample(fams, "mcp_mux_backend_up", "backend", c.backend); got != 0 {
			t.Errorf("mcp_mux_backend_up{backend=%q} = %v, want 0", c.backend, got)
		}
	}
}

// A cold start of many backends that come after the first list, at
// staggered times, costs an agent that lists again on every
// tools/list_changed (Claude Code) a few of them, not one a backend; the
// last is not held back, so each backend's tools are listed soon after
// it is ready.
func TestLateBackendsShareTheirListChanged(t *testing.T) {
	const n = 10
	var specs []config.Backend
	for i := range n {
		delay := 300*time.Millisecond + time.Duration(i)*200*time.Millisecond
		specs = append(specs, fixture(t, fmt.Sprintf("b%d", i), "-start-delay", delay.String()))
	}
	cfg := testConfig(specs...)
	cfg.Mux.FirstListWait.Duration = 100 * time.Millisecond
	cfg.Mux.Instructions = "Backends b0 to b9." // initialize does not wait for theirs
	m := startMuxConfig(t, cfg)
	var changed atomic.Int32
	var last atomic.Int64
	opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed.Add(1)
		last.Store(time.Now().UnixNano())
	}}
	cs := connectWith(t, m, mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.1"}, opts), "2025-11-25")
	if got := len(toolNames(t, cs)); got == n*(1+len(controlTools)) {
		t.Fatal("the first list waited for every backend: none is late")
	}
	testkit.Eventually(t, 30*time.Second, "every backend ready", func() bool {
		for _, st := range m.Status() {
			if st.State != stateReady {
				return false
			}
		}
		return true
	})
	var ready time.Time
	for _, st := range m.Status() {
		if st.Since.After(ready) {
			ready = st.Since
		}
	}
	testkit.Eventually(t, 10*time.Second, "every tool listed after list_changed", func() bool {
		return last.Load() > ready.UnixNano() && len(toolNames(t, cs)) == n*(1+len(controlTools))
	})
	t.Logf("%d backends ready from 0.3 s to 2.1 s after the start: %d tools/list_changed; the last %v after the last backend was ready",
		n, changed.Load(), time.Unix(0, last.Load()).Sub(ready))
	if got := changed.Load(); got > n/2 {
		t.Errorf("%d tools/list_changed for %d late backends, want at most %d", got, n, n/2)
	}
	if d := time.Unix(0, last.Load()).Sub(ready); d > lateHold+time.Second {
		t.Errorf("the last tools/list_changed came %v after the last backend was ready", d)
	}
}
