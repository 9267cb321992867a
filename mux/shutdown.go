package mux

import (
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
)

// How the mux ends: Close for a mux that goes on being a process (tests,
// check), Exit for mcp-mux's own exit, which leaves the backends to
// their supervisors.

// Close ends every session's subscriptions, stops every backend (in
// parallel, each with the configured grace) and every goroutine of the mux.
func (m *Mux) Close() { m.shutdown(m.settings().ShutdownGrace.Duration, false, false) }

// Exit ends the mux for mcp-mux's exit, which is to follow at once, as
// promptly as leaving nothing behind allows: an agent that stops a server
// kills it if it is not gone within a fraction of a second (Claude Code:
// SIGINT, SIGTERM 100 ms later, SIGKILL 400 ms after that), and the
// slowest of many backends would keep mcp-mux. Where a supervisor
// outlives mcp-mux (backends.Supervised), each backend is left to it
// (Backend.Leave), and Exit returns without waiting for anything: the
// exit closes the backends' stdin and ends every goroutine. A backend
// gets shutdown_grace to exit by itself, or none if signalled (the agent,
// or a user, wants mcp-mux gone now): SIGTERM at once. Elsewhere Exit is
// Close with that grace.
func (m *Mux) Exit(signalled bool) {
	grace := m.settings().ShutdownGrace.Duration
	if signalled {
		grace = 0
	}
	m.shutdown(grace, backends.Supervised, !signalled)
}

// shutdown is Close with grace for the backends; leave is Exit's: the
// backends are left to their supervisors, and nothing is waited for but
// the backends that have none and the memory's writes (with learn, the
// first starts in flight too: memoryWritten).
func (m *Mux) shutdown(grace time.Duration, leave, learn bool) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	// Last, when every request is over (or, leaving, at once): the audit
	// log's lines are written, and the metrics listener stops.
	defer m.stopObserving()
	var sessions []*mcp.ServerSession
	for ss := range m.sessions {
		sessions = append(sessions, ss)
	}
	w := m.watch
	m.mu.Unlock()

	if leave {
		// Nothing is cancelled: what would wake up would only take the
		// CPU from the exit. A backend that starts or restarts meanwhile
		// has a supervisor that kills it as mcp-mux exits.
		var wg sync.WaitGroup
		left := 0
		for _, mem := range m.members() {
			mem.mu.Lock()
			b := mem.b
			mem.mu.Unlock()
			if b == nil {
				continue
			}
			if b.Leave(grace) {
				if b.PID() != 0 {
					left++
				}
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				mem.stop(grace)
			}()
		}
		if left > 0 {
			m.log.Info("backends left to their supervisors, which stop them once mcp-mux is gone", "count", left, "grace", grace)
		}
		wg.Wait()
		m.memoryWritten(learn)
		return
	}
	if learn {
		// As memoryWritten does where backends are left: before anything
		// is cancelled, a first start in flight may finish and be written
		// (the writes end before m.wg.Wait below returns).
		t := time.NewTimer(memoryWrite)
		m.learnAtExit(t.C)
		t.Stop()
	}
	m.cancel()
	if w != nil {
		w.close()
	}
	// Sessions and backends end together: a session's Close waits for its
	// requests in flight, which end when their backend stops.
	var wg sync.WaitGroup
	for _, ss := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss.Close()
			m.sessionEnded(ss)
		}()
	}
	// A reload publishes its roster under m.mu, checking m.closed: this one
	// is the last.
	for _, mem := range m.members() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mem.stop(grace)
		}()
	}
	wg.Wait()
	m.wg.Wait()
}
