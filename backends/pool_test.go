package backends

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

func poolSpec(t *testing.T, args ...string) Spec {
	return Spec{Name: "fx", Command: testkit.FixtureBin(t), Args: append([]string{"-name", "fx"}, args...)}
}

func poolStart(t *testing.T, p *Pool, spec Spec, h Hooks) *Backend {
	t.Helper()
	opts := Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 10 * time.Second, Hooks: h,
		ClientCapabilities: func(context.Context) *mcp.ClientCapabilities {
			return &mcp.ClientCapabilities{Roots: mcp.RootCapabilities{ListChanged: true}, Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
		}}
	b, err := p.Start(testkit.CtxT(t), Identity(spec), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })
	return b
}

// fixtureStats is the fixture's own count of what it was sent.
func fixtureStats(t *testing.T, b *Backend) map[string]any {
	t.Helper()
	res, err := call(t, b, "stats", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(resultText(t, res)), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestClientsOfOneIdentityShareOneProcessUntilTheLastStops(t *testing.T) {
	p := NewPool()
	spec := poolSpec(t)
	var heardA, heardB atomic.Int32
	a := poolStart(t, p, spec, Hooks{ToolsChanged: func() { heardA.Add(1) }})
	b := poolStart(t, p, spec, Hooks{ToolsChanged: func() { heardB.Add(1) }})
	if a.PID() == 0 || a.PID() != b.PID() {
		t.Fatalf("two clients of one identity run pids %d and %d, want one process", a.PID(), b.PID())
	}
	other := poolStart(t, p, poolSpec(t, "-tools", "more"), Hooks{})
	if other.PID() == a.PID() {
		t.Fatal("a backend with other args joined the same process")
	}
	// What the backend sends on its own reaches every client.
	if _, err := call(t, a, "notify_list_changed", map[string]any{"kind": "tools"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "both clients hear the backend's list_changed", func() bool {
		return heardA.Load() >= 1 && heardB.Load() >= 1
	})
	pid := a.PID()
	a.Stop(time.Second)
	select {
	case <-a.Done():
	default:
		t.Error("a stopped view is not done")
	}
	if !errors.Is(a.Err(), ErrStopped) {
		t.Errorf("a stopped view's Err is %v", a.Err())
	}
	if _, err := call(t, b, "echo", map[string]any{"text": "still"}); err != nil || !alive(pid) {
		t.Fatalf("the other client's backend ended with the first client: alive %v, %v", alive(pid), err)
	}
	// A client that comes now joins the running one.
	c := poolStart(t, p, spec, Hooks{})
	if c.PID() != pid {
		t.Errorf("a later client got pid %d, want the running %d", c.PID(), pid)
	}
	b.Stop(time.Second)
	c.Stop(time.Second)
	testkit.Eventually(t, 5*time.Second, "the process ends with its last client", func() bool { return !alive(pid) })
	d := poolStart(t, p, spec, Hooks{})
	if d.PID() == pid || !alive(d.PID()) {
		t.Errorf("after the last client stopped, a new one got pid %d (old %d)", d.PID(), pid)
	}
}

func TestAKilledSharedBackendIsDoneForEveryClient(t *testing.T) {
	p := NewPool()
	spec := poolSpec(t)
	a := poolStart(t, p, spec, Hooks{})
	b := poolStart(t, p, spec, Hooks{})
	a.Kill(errors.New("hung"))
	for _, v := range []*Backend{a, b} {
		select {
		case <-v.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a client of a killed backend is not told")
		}
	}
	if err := b.Err(); err == nil || errors.Is(err, ErrMoved) {
		t.Errorf("the other client's Err is %v, want why it went down", err)
	}
	c := poolStart(t, p, spec, Hooks{})
	if c.PID() == a.PID() {
		t.Error("a client after the kill joined the dead process")
	}
}

func TestTheBackendHearsTheFirstSubscribeAndTheLastUnsubscribe(t *testing.T) {
	p := NewPool()
	spec := poolSpec(t)
	a := poolStart(t, p, spec, Hooks{})
	b := poolStart(t, p, spec, Hooks{})
	ctx := testkit.CtxT(t)
	uri := "fixture://fx/res/1"
	for _, v := range []*Backend{a, b} {
		if err := v.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	st := fixtureStats(t, b)
	if subs, unsubs := st["subscribe"].(map[string]any)[uri], st["unsubscribe"].(map[string]any)[uri]; subs != 1.0 || unsubs != nil {
		t.Fatalf("after two subscribes and one unsubscribe the backend was sent %v subscribe(s), %v unsubscribe(s); want 1 and none", subs, unsubs)
	}
	// A client that stops while it holds a URI lets it go.
	b.Stop(time.Second)
	c := poolStart(t, p, spec, Hooks{})
	testkit.Eventually(t, 5*time.Second, "the backend is told once no client holds the URI", func() bool {
		return fixtureStats(t, c)["unsubscribe"].(map[string]any)[uri] == 1.0
	})
}

func TestABackendAsksOnlyTheClientWhoseAgentIsInFlight(t *testing.T) {
	p := NewPool()
	spec := poolSpec(t, "-client-requests")
	hooks := func(name string, inFlight, connected int) Hooks {
		return Hooks{
			Agents: func() (int, int) { return inFlight, connected },
			Elicit: func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}, nil
			},
		}
	}
	a := poolStart(t, p, spec, hooks("a", 0, 1))
	poolStart(t, p, spec, hooks("b", 1, 1))
	res, err := call(t, a, "elicit", map[string]any{"mode": "form", "message": "who?"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); !strings.Contains(got, `"b"`) {
		t.Errorf("the backend's elicitation got %s, want the answer of b, the client with a request in flight", got)
	}
	poolStart(t, p, spec, hooks("c", 1, 1))
	res, err = call(t, a, "elicit", map[string]any{"mode": "form", "message": "who?"})
	if err == nil && !res.IsError {
		t.Fatalf("with two clients in flight the elicitation was answered: %s", resultText(t, res))
	}
	if got := errText(res, err); !strings.Contains(got, "cannot tell which") {
		t.Errorf("an ambiguous elicitation says %q", got)
	}
}

func TestAClientWhoseAgentsGiveOtherRootsMovesToAnInstanceOfItsOwn(t *testing.T) {
	p := NewPool()
	spec := poolSpec(t, "-client-requests")
	rootsOf := func(uri string) Hooks {
		return Hooks{Roots: func(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
			return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: uri}}}, nil
		}}
	}
	a := poolStart(t, p, spec, rootsOf("file:///a"))
	a2 := poolStart(t, p, spec, rootsOf("file:///a"))
	b := poolStart(t, p, spec, rootsOf("file:///b"))
	if a.PID() != b.PID() {
		t.Fatal("before the backend asked for roots, the clients did not share it")
	}
	res, err := call(t, a, "ask_roots", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); !strings.Contains(got, "file:///a") || strings.Contains(got, "file:///b") {
		t.Errorf("the backend was given %s, want a's roots only", got)
	}
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the client with other roots was not moved")
	}
	if !errors.Is(b.Err(), ErrMoved) {
		t.Errorf("the moved client's Err is %v, want ErrMoved", b.Err())
	}
	select {
	case <-a2.Done():
		t.Error("a client with the same roots was moved")
	default:
	}
	// Started again, it gets an instance of its roots, and so does the
	// next client with a's.
	b2 := poolStart(t, p, spec, rootsOf("file:///b"))
	if b2.PID() == a.PID() {
		t.Error("the moved client joined the instance of the other roots again")
	}
	if a3 := poolStart(t, p, spec, rootsOf("file:///a")); a3.PID() != a.PID() {
		t.Error("a client with a's roots did not join a's instance")
	}
	res, err = call(t, b2, "ask_roots", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); !strings.Contains(got, "file:///b") || strings.Contains(got, "file:///a") {
		t.Errorf("b's instance was given %s, want b's roots only", got)
	}
}

func errText(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

// Clients that come and go at once, and a kill among them: every Start
// gets a running backend or an error, nothing deadlocks, and once the last
// client stopped no process is left.
func TestClientsComingAndGoingAtOnceLeaveNothingBehind(t *testing.T) {
	p := NewPool()
	spec := poolSpec(t)
	var mu sync.Mutex
	seen := map[int]bool{}
	done := make(chan struct{})
	var workers sync.WaitGroup
	for w := range 6 {
		workers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				opts := Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 10 * time.Second}
				b, err := p.Start(testkit.CtxT(t), Identity(spec), spec, opts)
				if err != nil {
					t.Errorf("worker %d start %d: %v", w, i, err)
					return
				}
				mu.Lock()
				seen[b.PID()] = true
				mu.Unlock()
				if w == 0 && i%3 == 2 {
					b.Kill(errors.New("killed by the test"))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				b.Session().Ping(ctx, nil) // may fail: killed under it
				cancel()
				b.Stop(time.Second)
			}
		})
	}
	time.AfterFunc(3*time.Second, func() { close(done) })
	workers.Wait()
	if len(seen) < 2 {
		t.Errorf("%d processes over the run, want several (kills and last stops)", len(seen))
	}
	for pid := range seen {
		testkit.Eventually(t, 5*time.Second, fmt.Sprintf("process %d gone", pid), func() bool { return !alive(pid) })
	}
	if n := len(p.entries); n != 0 {
		t.Errorf("%d entries left in the pool", n)
	}
}
