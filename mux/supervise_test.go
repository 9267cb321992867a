package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// waitReady waits until backend i is ready with a process other than
// notPID, and one that is not about to be restarted because it was told
// other client capabilities than the agent's (see agentInitialized), and
// returns its pid.
func waitReady(t *testing.T, m *Mux, i, notPID int) int {
	t.Helper()
	var pid int
	testkit.Eventually(t, 10*time.Second, "backend to be ready again", func() bool {
		st := m.Status()[i]
		pid = st.PID
		if st.State != stateReady || st.PID <= 0 || st.PID == notPID || m.agent.stale(m.members()[i]) {
			return false
		}
		// Ready is set a moment before its tools join the merged
		// catalog, which is when a call can reach them.
		_, listed := m.cat.get().tools.lookup(m.exposedName(m.members()[i], "stats"))
		return listed
	})
	if pid <= 0 { // never signal pid 0 or -1: that is the test's own group
		t.Fatalf("bad pid %d", pid)
	}
	return pid
}

func TestKilledBackendRestartsAndRestoresSubscriptions(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	u := newUpdates()
	var listChanged atomic.Int32
	opts := u.opts()
	opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { listChanged.Add(1) }
	cs := connect(t, m, opts)
	subscribe(t, cs, res1)
	subscribe(t, cs, "fixture://notes/items/9") // through the template
	old := waitReady(t, m, 0, 0)

	killProcess(old)
	pid := waitReady(t, m, 0, old)

	// The new process was sent each held subscription once...
	st := fixtureStats(t, cs, "notes__stats")
	if st.PID != pid || st.Subscribe[res1] != 1 || st.Subscribe["fixture://notes/items/9"] != 1 {
		t.Errorf("new process (pid %d) stats: %+v, want one subscribe per held URI", pid, st)
	}
	// ...the agent is told each may have changed...
	u.waitFor(t, res1, 1)
	u.waitFor(t, "fixture://notes/items/9", 1)
	// ...and the catalog came and went with it.
	testkit.Eventually(t, 5*time.Second, "tools/list_changed", func() bool { return listChanged.Load() >= 1 })
	if s := m.Status()[0]; s.Restarts != 1 || !strings.Contains(s.LastError, killedReason) {
		t.Errorf("status after restart: %+v", s)
	}
	// Updates from the new process still reach the session.
	callText(t, cs, "notes__update", map[string]any{"uri": res1})
	u.waitFor(t, res1, 2)
}

func TestInFlightRequestFailsPromptlyWhenBackendDies(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs := connect(t, m, nil)
	pid := waitReady(t, m, 0, 0)
	errc := make(chan error, 1)
	called := arrived(t, cs, "notes__stats")
	go func() {
		_, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__sleep", Arguments: map[string]any{"ms": 30000}})
		errc <- err
	}()
	testkit.Eventually(t, 5*time.Second, "the call to be at the backend", called)
	killed := time.Now()
	killProcess(pid)
	select {
	case err := <-errc:
		je := rpcCode(t, err)
		if !strings.Contains(je.Message, "notes") {
			t.Errorf("error does not name the backend: %v", je)
		}
		t.Logf("in-flight call failed %v after the kill: %v", time.Since(killed), je.Message)
	case <-time.After(3 * time.Second):
		t.Fatal("in-flight request still hanging 3 s after its backend died")
	}
}

func TestRequestToDownBackendFailsAtOnceNamingIt(t *testing.T) {
	spec := fixture(t, "notes")
	spec.Restart = config.RestartNever
	m := startMux(t, spec, fixture(t, "other"))
	cs := connect(t, m, nil)
	killProcess(waitReady(t, m, 0, 0))
	testkit.Eventually(t, 5*time.Second, "notes to be failed", func() bool { return m.Status()[0].State == stateFailed })

	begin := time.Now()
	_, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__echo"})
	je := rpcCode(t, err)
	if !strings.Contains(je.Message, `"notes" is failed`) {
		t.Errorf("error %q does not name the backend and its state", je.Message)
	}
	// Once, and with what brings it back, as for a name it never listed.
	if strings.Count(je.Message, `"notes"`) != 1 || !strings.Contains(je.Message, "restart mcp-mux") {
		t.Errorf("error %q: want the backend named once, and the fix", je.Message)
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("took %v", d)
	}
	_, err = cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: res1})
	if je := rpcCode(t, err); !strings.Contains(je.Message, `"notes" is failed`) {
		t.Errorf("read: %q", je.Message)
	}
	if names := toolNames(t, cs); slices.Contains(names, "notes__echo") || !slices.Contains(names, "other__echo") {
		t.Errorf("tools while notes is down: %v", names)
	}
}

func TestCrashLoopEndsFailed(t *testing.T) {
	cfg := testConfig(fixture(t, "notes"))
	cfg.Mux.RestartMax = 3
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)
	pid := 0
	for i := 0; i < 2; i++ {
		pid = waitReady(t, m, 0, pid)
		cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__crash", Arguments: map[string]any{"code": 3}})
	}
	waitReady(t, m, 0, pid)
	cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__crash", Arguments: map[string]any{"code": 3}})
	testkit.Eventually(t, 5*time.Second, "failed after 3 crashes", func() bool { return m.Status()[0].State == stateFailed })
	testkit.Quiet(200 * time.Millisecond) // no restart may follow the failure (backoff is 10 ms here)
	if s := m.Status()[0]; s.State != stateFailed || s.Restarts != 2 || !strings.Contains(s.LastError, "exit status 3") {
		t.Errorf("status = %+v, want failed after 2 restarts with the exit status", s)
	}
}

func TestGarbageOnBackendStdoutDoesNotBreakIt(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs := connect(t, m, nil)
	callText(t, cs, "notes__noise", map[string]any{"text": "DEBUG: not json {"})
	if got := callText(t, cs, "notes__echo", map[string]any{"ok": true}); got != `{"ok":true}` {
		t.Errorf("after noise: %q", got)
	}
	if s := m.Status()[0]; s.Restarts != 0 || s.State != stateReady {
		t.Errorf("status = %+v", s)
	}
	// The log has the first such line; mcp-mux://backends counts them all.
	callText(t, cs, "notes__noise", map[string]any{"text": "DEBUG: still not json"})
	res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: uriBackends})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Backends []map[string]any `json:"backends"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &v); err != nil {
		t.Fatal(err)
	}
	if n := v.Backends[0]["stdout_noise"]; n != 2.0 {
		t.Errorf("mcp-mux://backends: stdout_noise %v, want 2:\n%s", n, res.Contents[0].Text)
	}
}

func TestTimedOutRequestIsCancelledAtBackend(t *testing.T) {
	spec := fixture(t, "notes")
	spec.RequestTimeout.Duration = 300 * time.Millisecond
	m := startMux(t, spec)
	cs := connect(t, m, nil)
	begin := time.Now()
	_, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__sleep", Arguments: map[string]any{"ms": 5000}})
	je := rpcCode(t, err)
	if !strings.Contains(je.Message, `backend "notes" timed out after 300ms`) {
		t.Errorf("error = %q", je.Message)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("timed out after %v, want about 300ms", d)
	}
	testkit.Eventually(t, 3*time.Second, "the backend to see notifications/cancelled", func() bool {
		return fixtureStats(t, cs, "notes__stats").Cancelled == 1
	})
	// It answered ping: slow, not hung, so it was not restarted.
	testkit.Quiet(pingTimeout / 2) // no restart may come for a backend that answers ping
	if s := m.Status()[0]; s.Restarts != 0 {
		t.Errorf("a slow backend was restarted: %+v", s)
	}
}

func TestHungBackendIsRestarted(t *testing.T) {
	spec := fixture(t, "notes")
	spec.RequestTimeout.Duration = 300 * time.Millisecond
	m := startMux(t, spec)
	cs := connect(t, m, nil)
	pid := waitReady(t, m, 0, 0)
	freezeProcess(t, pid) // answers nothing any more, not even ping
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__echo"})
	if err == nil {
		// Once freezeProcess returned before the stop (see there): if
		// another cause comes, say what answered.
		state, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		t.Fatalf("a call to the stopped backend (pid %d) succeeded: %+v; status %+v; /proc stat %q", pid, res, m.Status()[0], state)
	}
	if je := rpcCode(t, err); !strings.Contains(je.Message, "timed out") {
		t.Errorf("error = %q", je.Message)
	}
	waitReady(t, m, 0, pid)
	if s := m.Status()[0]; !strings.Contains(s.LastError, "hung") {
		t.Errorf("last error = %q, want the hang", s.LastError)
	}
	callText(t, cs, "notes__echo", nil)
}

func TestProgressExtendsDeadlineUpToMaxRequestTime(t *testing.T) {
	spec := fixture(t, "notes")
	spec.RequestTimeout.Duration = 300 * time.Millisecond
	cfg := testConfig(spec)
	cfg.Mux.MaxRequestTime.Duration = 2 * time.Second
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {}})

	call := func(steps int) error {
		p := &mcp.CallToolParams{Name: "notes__progress", Arguments: map[string]any{"steps": steps, "delay_ms": 150}}
		p.SetProgressToken("t1")
		_, err := cs.CallTool(testkit.CtxT(t), p)
		return err
	}
	// 8 × 150 ms = 1.2 s, four times the timeout, kept alive by progress.
	if err := call(8); err != nil {
		t.Errorf("a long tool reporting progress was cut off: %v", err)
	}
	// 20 × 150 ms = 3 s is past max_request_time.
	if je := rpcCode(t, call(20)); !strings.Contains(je.Message, "timed out") {
		t.Errorf("error = %q", je.Message)
	}
}

func TestLargeMessageWithinLimitPassesThrough(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs := connect(t, m, nil)
	const size = 4 << 20
	if got := callText(t, cs, "notes__big", map[string]any{"bytes": size}); len(got) != size {
		t.Errorf("got %d bytes, want %d", len(got), size)
	}
}
