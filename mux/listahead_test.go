package mux

import (
	"slices"
	"testing"
	"time"

	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// listURIs lists one page of resources and returns its URIs and next cursor.
func listURIs(t *testing.T, cs *mcp.ClientSession, cursor string) ([]string, string) {
	t.Helper()
	res, err := cs.ListResources(testkit.CtxT(t), &mcp.ListResourcesParams{Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	return uris, res.NextCursor
}

// fetchedAhead reports whether a session of m holds the page for the
// agent's cursor, fetched ahead (listahead.go), whole.
func fetchedAhead(m *Mux, cursor string) bool {
	for _, s := range m.allSessions() {
		s.mu.Lock()
		a := s.ahead
		s.mu.Unlock()
		if a == nil || a.cursor != cursor {
			continue
		}
		select {
		case <-a.done:
			return a.err == nil
		default:
		}
	}
	return false
}

// A page mux fetched ahead is not served once its backend announced that
// its resources changed: the agent, told of the change, gets the new list.
func TestNextResourcesPageChangedSinceItWasFetchedAheadIsFetchedAgain(t *testing.T) {
	m := startMux(t, fixture(t, "first", "-resources", "2"), fixture(t, "second", "-resources", "2"))
	changed := make(chan struct{}, 10)
	cs := connect(t, m, &mcp.ClientOptions{ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
		changed <- struct{}{}
	}})
	ctx := testkit.CtxT(t)

	page1, next := listURIs(t, cs, "")
	if !slices.Contains(page1, "fixture://first/res/1") || next == "" {
		t.Fatalf("first page = %v, next %q: want first's resources and a cursor to second's", page1, next)
	}
	// mux fetches second's page ahead: once it has it, change it.
	testkit.Eventually(t, 5*time.Second, "second's page fetched ahead", func() bool { return fetchedAhead(m, next) })
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "second__add_resource", Arguments: map[string]any{"uri": "fixture://second/new", "text": "new"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no resources/list_changed reached the agent")
	}
	page2, _ := listURIs(t, cs, next)
	if !slices.Contains(page2, "fixture://second/new") {
		t.Errorf("second page after the change = %v: want fixture://second/new in it", page2)
	}
}

// A walk costs each backend one request per page, as without fetching
// ahead, and every session walks on its own.
func TestTwoSessionsWalkingResourcesGetEveryPage(t *testing.T) {
	m := startMux(t, fixture(t, "big", "-resources", "30", "-page-size", "10"), fixture(t, "small", "-resources", "3"))
	a, b := connect(t, m, nil), connect(t, m, nil)
	before := fixtureStats(t, a, "big__stats").ListResources
	walk := func(cs *mcp.ClientSession, cursor string) ([]string, string) {
		uris, next := listURIs(t, cs, cursor)
		return uris, next
	}
	var gotA, gotB []string
	curA, curB := "", ""
	for {
		// Interleaved: each session's page fetched ahead is its own.
		var ua, ub []string
		if curA != "done" {
			ua, curA = walk(a, curA)
			gotA = append(gotA, ua...)
			if curA == "" {
				curA = "done"
			}
		}
		if curB != "done" {
			ub, curB = walk(b, curB)
			gotB = append(gotB, ub...)
			if curB == "" {
				curB = "done"
			}
		}
		if curA == "done" && curB == "done" {
			break
		}
	}
	for name, got := range map[string][]string{"a": gotA, "b": gotB} {
		if len(got) != 30+3+2 { // mux's own 2 come last
			t.Errorf("session %s listed %d resources, want 35: %v", name, len(got), got)
		}
	}
	if got := fixtureStats(t, a, "big__stats").ListResources - before; got != 6 {
		t.Errorf("big served %d list pages for two walks of 3 pages, want 6", got)
	}
}

// A page fetched ahead that fails (here: the backend's list outlasts
// request_timeout) counts as the agent's own fetch of it: the agent waits
// for one request_timeout, not for that one and then a second fetch.
func TestNextResourcesPageThatFailedAheadIsNotFetchedAgain(t *testing.T) {
	cfg := testConfig(fixture(t, "first", "-resources", "2"),
		fixture(t, "slow", "-resources", "2", "-list-delay", "30s", "-list-delay-after", "2"))
	cfg.Mux.RequestTimeout.Duration = 500 * time.Millisecond
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)

	page1, next := listURIs(t, cs, "")
	if !slices.Contains(page1, "fixture://first/res/1") || next == "" {
		t.Fatalf("first page = %v, next %q: want first's resources and a cursor to slow's", page1, next)
	}
	page2, _ := listURIs(t, cs, next) // slow is skipped: its list failed
	if slices.Contains(page2, "fixture://slow/res/1") {
		t.Errorf("second page = %v: slow's list cannot have been served", page2)
	}
	// Its first list was mux's catalog at start; the second the one
	// fetched ahead. A third would be the page fetched again.
	if got := fixtureStats(t, cs, "slow__stats").ListResources; got != 2 {
		t.Errorf("slow got %d resources/list requests, want 2", got)
	}
}
