package mux

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-mux/mcp-mux/mux/agents"
)

// firstList is the first list's wait for the backends still starting:
// bounded by first_list_wait (an agent may give up on a list that takes as
// long as a slow backend's start), after which what is ready is served and
// the rest is announced with list_changed as each becomes ready.
type firstList struct {
	mu  sync.Mutex
	end time.Time // when the wait ends; zero until the first list came
	// over: the wait has ended, and some list may have gone out without a
	// backend that is not ready: from now on one that becomes ready is
	// announced. A backend checks it after adding its part to the catalog,
	// a list sets it before reading the catalog: one of them sees the other.
	over atomic.Bool
}

// waitStarted waits, on the first list only, until every backend's first
// start attempt has finished or first_list_wait has passed since that list
// came; the backends still starting then are late (logged, and marked in
// mcp-mux://backends).
//
// An agent known to ignore list_changed (Claude Desktop) would never learn
// of a late backend: its lists wait for every backend's first start, up to
// startup_timeout. One that does not wait for its servers (Codex CLI)
// would miss the whole list if it came after its patience: its wait ends
// sooner (firstListBy).
//
// Only the backends of the session's view (profile.go) are waited for: one
// it cannot see would delay its list for nothing. A wait that ends with
// them all started does not end the first list's wait for the others, as
// the list that went out lacks none of its own.
func (m *Mux) waitStarted(ctx context.Context) {
	s := sessionFrom(ctx)
	v := m.viewOf(s)
	if s != nil && !traitsOf(s).ListChanged {
		m.waitEveryStart(ctx, v, m.settings().StartupTimeout.Duration)
	}
	if m.first.over.Load() {
		return
	}
	m.first.mu.Lock()
	if m.first.end.IsZero() {
		m.first.end = time.Now().Add(m.settings().FirstListWait.Duration)
	}
	end := m.first.end
	m.first.mu.Unlock()
	if by := s.firstListBy(); !by.IsZero() && by.Before(end) {
		end = by
	}
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	for _, mem := range v.members(m.members()) {
		select {
		case <-mem.started:
		case <-timer.C:
			m.endFirstWait()
			return
		case <-ctx.Done():
			return
		case <-m.ctx.Done():
			return
		}
	}
	if v.all() {
		m.endFirstWait()
	}
}

// firstListBy is when the first list of agent a, whose initialize came at
// came, must be answered at the latest; zero if first_list_wait alone
// bounds it. An agent that does not wait for its servers (Codex CLI) sends
// its first request with the tools listed within its patience, counted
// from when it started them: the list waits for the backends still
// starting only so long (hurried), and what is not ready then comes with
// list_changed. An initialize within that patience of mcp-mux's own start
// is the agent that just started it: the count began then, not at the
// initialize.
func (m *Mux) firstListBy(a agents.Agent, came time.Time) time.Time {
	d, ok := hurried(a)
	if !ok || came.IsZero() {
		return time.Time{}
	}
	from := came
	if came.Sub(m.born) < a.Patience {
		from = m.born
	}
	return from.Add(d)
}

// firstListBy is when s's first list must be answered at the latest (zero:
// first_list_wait alone bounds it).
func (s *session) firstListBy() time.Time {
	if s == nil {
		return time.Time{}
	}
	if n := s.listBy.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// waitEveryStart waits until the first start attempt of every backend of
// view v has finished, or for d at most.
func (m *Mux) waitEveryStart(ctx context.Context, v *view, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for _, mem := range v.members(m.members()) {
		select {
		case <-mem.started:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		case <-m.ctx.Done():
			return
		}
	}
}

func (m *Mux) endFirstWait() {
	if m.first.over.Swap(true) {
		return
	}
	var late []string
	for _, mem := range m.members() {
		select {
		case <-mem.started:
			continue
		default:
		}
		mem.mu.Lock()
		mem.late = mem.state != stateReady // it may have made it since
		if mem.late {
			late = append(late, mem.spec.Name)
		}
		mem.mu.Unlock()
	}
	if len(late) > 0 {
		m.log.Warn("first list served without the backends still starting (late); list_changed follows as each is ready",
			"late", strings.Join(late, ", "), "first_list_wait", m.settings().FirstListWait.Duration)
		m.builtinChanged(uriBackends)
	}
}
