package mux

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/agents"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// initializedNow reports whether mem's first initialize has finished.
func initializedNow(mem *member) bool {
	select {
	case <-mem.initialized:
		return true
	default:
		return false
	}
}

// Claude Code, cold: its server/discover (the current era, its name in
// _meta) waits for the backends' instructions up to a little less than
// its own 5 s, and then carries those of every backend that initialized
// by then, not all or nothing. A backend later than that is left out:
// the answer did not wait for it.
func TestClaudeCodesFirstSessionHasTheInstructionsOfTheBackendsThatInitializedInTime(t *testing.T) {
	m := startMux(t,
		fixture(t, "cc-quick", "-instructions", "Quick says hi."),
		// Past the 2 s an agent without a known patience is given, well
		// within Claude Code's.
		fixture(t, "cc-steady", "-instructions", "Steady says hi.", "-start-delay", "2700ms"),
		fixture(t, "cc-late", "-instructions", "Late says hi.", "-start-delay", "9s"),
	)
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.1.328"}, nil)
	cs := connectWith(t, m, c, "") // server/discover, as Claude Code
	late := m.members()[2]
	lateInitialized := initializedNow(late)
	got := cs.InitializeResult().Instructions
	for _, want := range []string{"Quick says hi.", "Steady says hi."} {
		if !strings.Contains(got, want) {
			t.Errorf("instructions lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Late says hi.") || lateInitialized {
		t.Errorf("the answer waited for the backend that starts after Claude Code's patience (initialized %v):\n%s", lateInitialized, got)
	}
}

// Codex CLI does not wait for a slow server: its first model request has
// the tools of whatever answered within a second. Its initialize does not
// wait for the instructions of a backend that takes longer than that; a
// quick one's are in it.
func TestAnAgentThatDoesNotWaitGetsInitializeWithoutWaitingForInstructions(t *testing.T) {
	m := startMux(t,
		fixture(t, "cx-slow", "-instructions", "Slow says hi.", "-start-delay", "1500ms"),
		fixture(t, "cx-quick", "-instructions", "Quick says hi."),
	)
	c := mcp.NewClient(&mcp.Implementation{Name: "codex-mcp-client", Title: "Codex", Version: "0.169.0"}, nil)
	cs := connectWith(t, m, c, "2025-06-18")
	slowInitialized := initializedNow(m.members()[0])
	got := cs.InitializeResult().Instructions
	if slowInitialized || strings.Contains(got, "Slow says hi.") {
		t.Errorf("initialize waited for the slow backend's instructions (initialized %v):\n%s", slowInitialized, got)
	}
	if !strings.Contains(got, "Quick says hi.") {
		t.Errorf("instructions lack the quick backend's:\n%s", got)
	}
}

// Cold, an agent that does not wait gets its first list within its own
// patience, with the tools of the backends ready by then; one still
// starting is announced with list_changed once it is ready, and its tools
// are in the next list.
func TestAnAgentThatDoesNotWaitGetsItsFirstListWithinItsPatience(t *testing.T) {
	m := startMux(t,
		fixture(t, "cx-quick"),
		fixture(t, "cx-late", "-start-delay", "3s"),
	)
	changed := make(chan struct{}, 1)
	c := mcp.NewClient(&mcp.Implementation{Name: "codex-mcp-client", Title: "Codex", Version: "0.169.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs := connectWith(t, m, c, "2025-06-18")
	first := toolNames(t, cs)
	late := m.members()[1]
	lateStarted := late.listed()
	if !slices.Contains(first, "cx-quick__echo") {
		t.Errorf("the first list lacks the backend that was ready: %v", first)
	}
	if slices.Contains(first, "cx-late__echo") || lateStarted {
		t.Fatalf("the first list waited for the backend still starting (ready %v): %v", lateStarted, first)
	}
	select {
	case <-changed:
	case <-testkit.CtxT(t).Done():
		t.Fatal("no tools/list_changed once the late backend was ready")
	}
	if again := toolNames(t, cs); !slices.Contains(again, "cx-late__echo") {
		t.Errorf("the list after list_changed lacks the late backend: %v", again)
	}
}

// Codex CLI counts its grace from when it started its servers: the first
// list of the agent that just started mcp-mux is due most of that grace
// after mcp-mux's own start (the backends, started beside it, have that
// long to be in it, as they would have directly), and one of an agent
// that came later, most of it after its initialize. An agent that waits
// has no such deadline.
func TestTheFirstListOfAnAgentThatDoesNotWaitIsDueMostOfItsGraceAfterItStartedUs(t *testing.T) {
	codex := agents.Of("codex-mcp-client")
	born := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	m := &Mux{born: born}
	for _, c := range []struct {
		came, want time.Duration
	}{
		{30 * time.Millisecond, 800 * time.Millisecond},
		{300 * time.Millisecond, 800 * time.Millisecond},
		{time.Minute, time.Minute + 800*time.Millisecond},
	} {
		if got := m.firstListBy(codex, born.Add(c.came)).Sub(born); got != c.want {
			t.Errorf("initialize %v after mcp-mux started: first list due %v after, want %v", c.came, got, c.want)
		}
	}
	if by := m.firstListBy(agents.Of("claude-code"), born.Add(time.Millisecond)); !by.IsZero() {
		t.Errorf("Claude Code, which waits: first list due at %v, want no deadline of its own", by)
	}
}
