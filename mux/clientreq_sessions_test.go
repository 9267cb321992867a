package mux

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Several agent sessions on one Mux (serve --http, the shared process): a
// backend's sampling or elicitation request goes to the session whose
// request it serves, and when mux cannot tell which that is, the backend
// is refused rather than another agent asked.

// asker is an agent that answers elicitation with its name and sampling
// with "<name> says: <prompt>", and keeps what it was asked.
type asker struct {
	name  string
	mu    sync.Mutex
	asked []string
}

func (a *asker) elicit(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, "elicit "+req.Params.Message)
	a.mu.Unlock()
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": a.name}}, nil
}

func (a *asker) sample(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, "sample")
	a.mu.Unlock()
	return (&sampler{name: a.name}).handle(ctx, req)
}

func (a *asker) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

// connectAsker attaches a as a handshake-era stdio session (roots with
// listChanged, sampling, elicitation).
func connectAsker(t *testing.T, m *Mux, a *asker) (*mcp.Client, *mcp.ClientSession) {
	t.Helper()
	c := agent(&mcp.ClientOptions{ElicitationHandler: a.elicit, CreateMessageWithToolsHandler: a.sample})
	return c, connectWith(t, m, c, "2025-11-25")
}

func TestElicitationGoesToTheCallingSessionNotTheLatestActive(t *testing.T) {
	m := startMux(t, fixture(t, "ask", "-client-requests"))
	a, b := &asker{name: "A"}, &asker{name: "B"}
	_, csA := connectAsker(t, m, a)
	_, csB := connectAsker(t, m, b)

	for _, tc := range []struct {
		caller, other *asker
		csCaller      *mcp.ClientSession
		csOther       *mcp.ClientSession
	}{{a, b, csA, csB}, {b, a, csB, csA}} {
		// The other session made a request since the caller's last one.
		callText(t, tc.csCaller, "ask__echo", map[string]any{"x": 1})
		callText(t, tc.csOther, "ask__echo", map[string]any{"x": 2})
		before := len(tc.other.seen())
		got := callText(t, tc.csCaller, "ask__elicit", map[string]any{"mode": "form", "message": "Your name?"})
		if want := `{"action":"accept","content":{"name":"` + tc.caller.name + `"}}`; got != want {
			t.Fatalf("%s called the eliciting tool, and it returned %s; want %s (what %s answered)", tc.caller.name, got, want, tc.caller.name)
		}
		if n := len(tc.other.seen()); n != before {
			t.Fatalf("%s, which did not call the tool, was asked: %q", tc.other.name, tc.other.seen())
		}
	}
}

// toolErrorOr calls a tool that must fail and returns its error text, or
// says what came instead (for the test's goroutine to report).
func toolErrorOr(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) string {
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	switch {
	case err != nil:
		return "calling " + name + ": " + err.Error()
	case !res.IsError:
		return "not a tool error: " + text(t, res.Content)
	}
	return text(t, res.Content)
}

func TestBackendRequestWhileTwoSessionsAreInFlightIsRefused(t *testing.T) {
	for _, tc := range []struct{ tool, capName string }{
		{"ask__elicit", "elicitation (form mode)"},
		{"ask__sample", "sampling"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			m := startMux(t, fixture(t, "ask", "-client-requests"))
			a, b := &asker{name: "A"}, &asker{name: "B"}
			_, csA := connectAsker(t, m, a)
			_, csB := connectAsker(t, m, b)

			// A's call waits at the backend before it asks; meanwhile B
			// sends a call of its own, which stays in flight, and so B is
			// the most recently active session when the backend asks.
			res := make(chan string, 1)
			calledA := arrived(t, csA, "ask__stats")
			go func() {
				res <- toolErrorOr(t, csA, tc.tool, map[string]any{"mode": "form", "message": "Your name?", "prompt": "hi", "delay_ms": 1500})
			}()
			testkit.Eventually(t, 5*time.Second, "A's call to be at the backend", calledA)
			ctx, cancel := context.WithCancel(testkit.CtxT(t))
			done := make(chan struct{})
			calledB := arrived(t, csB, "ask__stats")
			go func() {
				defer close(done)
				csB.CallTool(ctx, &mcp.CallToolParams{Name: "ask__sleep", Arguments: map[string]any{"ms": 60000}})
			}()
			t.Cleanup(func() { cancel(); <-done })
			testkit.Eventually(t, 5*time.Second, "B's call to be at the backend", calledB)

			got := <-res
			for _, want := range []string{"error -32603: ", `2 agent sessions have requests in flight to backend "ask"`, tc.capName, `share = "never"`} {
				if !strings.Contains(got, want) {
					t.Fatalf("the backend got %q; want it to say %q (if an agent was asked, A's delay_ms of 1.5 s may have passed before B's call arrived)", got, want)
				}
			}
			if len(a.seen()) != 0 || len(b.seen()) != 0 {
				t.Fatalf("an agent was asked: A %q, B %q; want neither", a.seen(), b.seen())
			}
		})
	}
}

// The fixture's ask_later sends its request at the agent's next
// roots/list_changed, which comes after the arming call was answered: no
// request of any agent is in flight to the backend when it asks.
func TestBackendRequestOutsideAnyRequestGoesOnlyToTheOnlySession(t *testing.T) {
	m := startMux(t, fixture(t, "ask", "-client-requests"))
	a, b := &asker{name: "A"}, &asker{name: "B"}
	cA, csA := connectAsker(t, m, a)
	_, csB := connectAsker(t, m, b)
	dir := t.TempDir()

	askLater := func(kind, out string) string {
		t.Helper()
		callText(t, csA, "ask__ask_later", map[string]any{"kind": kind, "out": out})
		cA.AddRoots(&mcp.Root{URI: "file:///work/" + filepath.Base(out), Name: out})
		var got []byte
		testkit.Eventually(t, 10*time.Second, "the backend's "+kind+" request to be answered", func() bool {
			var err error
			got, err = os.ReadFile(out)
			return err == nil && len(got) > 0
		})
		return string(got)
	}

	// A made the last request, but B may be the one the backend wants.
	for _, kind := range []string{"elicit", "sample"} {
		got := askLater(kind, filepath.Join(dir, kind+"-two"))
		for _, want := range []string{"error -32603: ", `no request of an agent is in flight to backend "ask"`, "2 agent sessions", `share = "never"`} {
			if !strings.Contains(got, want) {
				t.Fatalf("with two sessions, the backend's %s got %q; want it to say %q", kind, got, want)
			}
		}
	}
	if len(a.seen()) != 0 || len(b.seen()) != 0 {
		t.Fatalf("an agent was asked: A %q, B %q; want neither", a.seen(), b.seen())
	}

	csB.Close()
	testkit.Eventually(t, 5*time.Second, "B's session to end", func() bool { return len(m.liveSessions()) == 1 })
	if got := askLater("elicit", filepath.Join(dir, "elicit-one")); got != `{"action":"accept","content":{"name":"A"}}` {
		t.Fatalf("with one session, the backend's elicitation got %s; want A's answer", got)
	}
	if got := askLater("sample", filepath.Join(dir, "sample-one")); got != "A says: later" {
		t.Fatalf("with one session, the backend's sampling got %q; want A's answer", got)
	}
}
