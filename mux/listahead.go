package mux

import (
	"context"
	"time"

	"github.com/mcp-mux/mcp-mux/backends"
)

// A resources/list walk through mux costs, per page, the backend's
// encoding, mux's relay and the agent's decoding, one after the other. An
// agent that got a page with a next cursor asks for that page next, so mux
// fetches it while the agent reads the one it has: each session keeps one
// page ahead (listAhead), so the backend's work overlaps the agent's.
// Walks of 10 × 1,000 resources, medians of 30: 51.5 and 55.6 ms without,
// 44.2 and 47.8 ms with it (two alternating runs).
//
// A page fetched ahead is the backend's answer of a few milliseconds
// earlier, as if the agent had asked then; it is dropped, and the page
// fetched again, when the backend announced a change of its resources or
// was restarted since, when the session asks for another cursor, or when
// aheadKeep passed.

// aheadKeep is how long a page fetched ahead is served: an agent walking
// the list asks within milliseconds; one that comes back later gets a
// page fetched then. (A session holds at most one page, until its next
// list or its end.)
const aheadKeep = 2 * time.Second

// listAhead is one backend page fetched for the session's next cursor.
type listAhead struct {
	cursor  string            // the cursor mux gave the agent, which this page answers
	mem     *member           // whose page
	b       *backends.Backend // the process it came from: a restart makes the page stale
	gen     uint64            // mem.resourcesChanged() when the fetch began
	cancel  context.CancelFunc
	done    chan struct{} // closed when page, err and fetched are set
	page    *resourcePage
	err     error
	fetched time.Time
}

// resourcesChanged counts mem's resources/list_changed notifications: a
// page fetched ahead under an older count is stale.
func (mem *member) resourcesChanged() uint64 { return mem.resGen.Load() }

// fetchAhead starts fetching mem's page at backendCursor for s, to answer
// the agent's cursor next; it replaces what s had fetched ahead.
func (m *Mux) fetchAhead(s *session, cursor string, mem *member, b *backends.Backend, backendCursor string) {
	ctx, cancel := context.WithTimeout(m.ctx, m.requestTimeout(mem))
	a := &listAhead{cursor: cursor, mem: mem, b: b, gen: mem.resourcesChanged(), cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		cancel()
		return
	}
	old := s.ahead
	s.ahead = a
	s.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	if !m.goOwned(func() {
		defer cancel()
		a.page, a.err = fetchResources(ctx, b, backendCursor)
		a.fetched = time.Now()
		close(a.done)
	}) {
		// mux is closing: nobody will fetch it.
		a.err = context.Canceled
		close(a.done)
	}
}

// takeAhead returns what was fetched ahead for the agent's cursor from mem
// (waiting for it if it is still coming): its page, or the backend's
// error, which stands for the agent's own fetch (fetching again would make
// the agent wait twice for a backend that does not answer). It is nil if
// there is none or it is stale: then the caller fetches the page itself.
func (m *Mux) takeAhead(ctx context.Context, s *session, cursor string, mem *member, b *backends.Backend) *listAhead {
	s.mu.Lock()
	a := s.ahead
	if a != nil && a.cursor == cursor {
		s.ahead = nil
	}
	s.mu.Unlock()
	if a == nil || a.cursor != cursor {
		return nil
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		a.cancel()
		return nil
	}
	if a.mem != mem || a.b != b || mem.resourcesChanged() != a.gen || time.Since(a.fetched) > aheadKeep {
		return nil
	}
	return a
}

// dropAhead cancels what s fetched ahead (its session ended).
func (s *session) dropAhead() {
	s.mu.Lock()
	a := s.ahead
	s.ahead = nil
	s.mu.Unlock()
	if a != nil {
		a.cancel()
	}
}
