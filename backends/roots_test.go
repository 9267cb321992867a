package backends

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A backend that asks for roots as it is initialized, later than at once
// (-roots-delay), is told apart from one that does not, before any request
// of the agent's; SettleRoots returns once its roots/list is answered and
// settle more has passed, and at once for the other.
func TestABackendThatAskedForRootsAsItStartedIsToldApart(t *testing.T) {
	var mu sync.Mutex
	var answeredAt time.Time
	opts := Options{
		ClientCapabilities: func(context.Context) *mcp.ClientCapabilities {
			return &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}}
		},
		Hooks: Hooks{Roots: func(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
			mu.Lock()
			answeredAt = time.Now()
			mu.Unlock()
			return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///r"}}}, nil
		}},
	}
	ctx := testkit.CtxT(t)
	asks, _, err := start(t, opts, "-client-requests", "-roots-at-start", "-roots-delay", "50ms")
	if err != nil {
		t.Fatal(err)
	}
	if !asks.AskedForRoots(ctx) {
		t.Fatal("a backend that asked for roots 50 ms after it was initialized: AskedForRoots false")
	}
	if asks.RootsSettled(time.Second) {
		t.Error("RootsSettled true within a second of the answer")
	}
	asks.SettleRoots(ctx, 100*time.Millisecond)
	mu.Lock()
	at := answeredAt
	mu.Unlock()
	if at.IsZero() || time.Since(at) < 100*time.Millisecond {
		t.Errorf("SettleRoots returned %v after the answer (answered: %v), want 100 ms at least", time.Since(at), !at.IsZero())
	}

	// What it asks for later, at a roots list_changed, it asks for while
	// it serves, as with any client: no request waits for it.
	mu.Lock()
	before := answeredAt
	mu.Unlock()
	if err := asks.NotifyRootsListChanged(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the backend to ask again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return answeredAt.After(before)
	})
	if !asks.RootsSettled(50 * time.Millisecond) {
		t.Error("RootsSettled false after a roots/list asked at a list_changed")
	}

	quiet, _, err := start(t, opts, "-client-requests")
	if err != nil {
		t.Fatal(err)
	}
	if quiet.AskedForRoots(ctx) {
		t.Error("a backend that never asked: AskedForRoots true")
	}
	if !quiet.RootsSettled(time.Hour) {
		t.Error("a backend that never asked: RootsSettled false")
	}
}
