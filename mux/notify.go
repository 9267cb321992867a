package mux

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/outq"
)

// coalesceWindow is the least time between two list_changed notifications
// of mux: a backend that sends a burst of 50 costs the agent one or two.
const coalesceWindow = 50 * time.Millisecond

// lateHold bounds how long a list_changed waits for the backends still
// starting after the first list (holdForLate).
const lateHold = time.Second

// notifyTimeout bounds the context of one notification sent through the
// go-sdk (outq.Queue.SendLoop). The go-sdk's write to an HTTP agent that
// stopped reading does not end with it (the HTTP door's bound on writes
// ends that write); only the session's own goroutine waits on it.
const notifyTimeout = outq.SendTimeout

// listNotifier sends tools/prompts/resources list_changed to the sessions
// whose lists changed, coalesced: marks made while one is being sent, or
// within coalesceWindow of it, go out together in the next one. A change
// marked for a backend goes only to the sessions whose view (profile.go)
// has it; one marked for a session, to it alone.
type listNotifier struct {
	m         *Mux
	mu        sync.Mutex
	pending   kinds // for every session
	byBackend map[string]kinds
	bySession map[*session]kinds
	wake      chan struct{}
}

func newListNotifier(m *Mux) *listNotifier {
	return &listNotifier{m: m, wake: make(chan struct{}, 1)}
}

// mark marks k changed for every session.
func (n *listNotifier) mark(k kinds) {
	n.mu.Lock()
	n.pending |= k
	n.mu.Unlock()
	n.poke()
}

// markBackend marks k changed for the sessions that see the backend
// called name.
func (n *listNotifier) markBackend(name string, k kinds) {
	n.mu.Lock()
	if n.byBackend == nil {
		n.byBackend = map[string]kinds{}
	}
	n.byBackend[name] |= k
	n.mu.Unlock()
	n.poke()
}

// markSession marks k changed for s alone.
func (n *listNotifier) markSession(s *session, k kinds) {
	n.mu.Lock()
	if n.bySession == nil {
		n.bySession = map[*session]kinds{}
	}
	n.bySession[s] |= k
	n.mu.Unlock()
	n.poke()
}

func (n *listNotifier) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// holdForLate holds the next notification while backends late for the
// first list are still starting, so that they share it: each list_changed
// makes an agent like Claude Code list every page again, and a cold start
// of twenty servers sent it one a backend. It ends when none is left
// starting (the last one's goes out at once) or lateHold after it began.
func (n *listNotifier) holdForLate() {
	m := n.m
	if !m.lateStarting() {
		return
	}
	t := time.NewTimer(lateHold)
	defer t.Stop()
	for m.lateStarting() {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			return
		case <-n.wake: // a mark, or a late backend went down: look again
		}
	}
}

// lateStarting reports whether a backend that was late for the first
// list is still starting.
func (m *Mux) lateStarting() bool {
	for _, mem := range m.members() {
		mem.mu.Lock()
		late := mem.late && mem.state == stateStarting
		mem.mu.Unlock()
		if late {
			return true
		}
	}
	return false
}

func (n *listNotifier) loop() {
	m := n.m
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-n.wake:
		}
		n.holdForLate()
		n.mu.Lock()
		all, byBackend, bySession := n.pending, n.byBackend, n.bySession
		n.pending, n.byBackend, n.bySession = 0, nil, nil
		n.mu.Unlock()
		// deliver never waits for an agent that does not read, so none
		// delays another session's list_changed (it waits only, briefly,
		// for a stdio agent reading a backlog: outq.Queue.Pace).
		for _, sess := range m.liveSessions() {
			k := all | bySession[sess]
			if len(byBackend) > 0 {
				v := m.viewOf(sess)
				for name, bk := range byBackend {
					if !hiddenFromView(v, name) {
						k |= bk
					}
				}
			}
			if p := listChangedParams(sess, kindTools, &mcp.ToolListChangedParams{}); k&kindTools != 0 && p != nil {
				m.deliver(sess, "notifications/tools/list_changed", p)
			}
			if p := listChangedParams(sess, kindPrompts, &mcp.PromptListChangedParams{}); k&kindPrompts != 0 && p != nil {
				m.deliver(sess, "notifications/prompts/list_changed", p)
			}
			if p := listChangedParams(sess, kindResources, &mcp.ResourceListChangedParams{}); k&kindResources != 0 && p != nil {
				m.deliver(sess, "notifications/resources/list_changed", p)
			}
		}
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(coalesceWindow):
		}
	}
}

// progressWaiter is a call in flight that asked for progress: where the
// notifications go, with which token, and the deadline they extend.
type progressWaiter struct {
	ctx      context.Context // the agent's request's (see deliverFor)
	s        *session        // the agent's session
	token    any             // the agent's own token
	deadline *deadline
}

// awaitProgress gives a forwarded request's progress token (in meta) one
// of mux's own, unique to this request, and routes the backend's progress
// for it back to s under the agent's token, extending d, until done is
// called. Agents choose tokens per session, so two sessions may use the
// same one on one backend: rewritten, no session sees another's progress.
// meta is not changed; the returned copy goes to the backend.
func (mem *member) awaitProgress(ctx context.Context, meta mcp.Meta, s *session, d *deadline) (fwd mcp.Meta, done func()) {
	tok, ok := meta["progressToken"]
	if !ok || tok == nil {
		return meta, func() {}
	}
	key := "mcp-mux-" + strconv.FormatUint(progressSeq.Add(1), 10)
	fwd = maps.Clone(meta)
	fwd["progressToken"] = key
	mem.mu.Lock()
	mem.progress[key] = progressWaiter{ctx, s, tok, d}
	mem.mu.Unlock()
	return fwd, func() {
		// The go-sdk hands a backend's response to the caller at once but
		// queues its notifications, so progress sent just before the
		// response may be handled just after it: keep routing it briefly.
		// The key is this request's alone, so nothing else can reuse it.
		time.AfterFunc(progressGrace, func() {
			mem.mu.Lock()
			delete(mem.progress, key)
			mem.mu.Unlock()
		})
	}
}

// progressSeq numbers the progress tokens mux gives forwarded requests,
// across the process: Muxes that share a backend (WithPool) hear each
// other's progress, and tell theirs apart by the token.
var progressSeq atomic.Uint64

// progressGrace is how long a finished call's progress token still routes.
const progressGrace = 500 * time.Millisecond

func (mem *member) forwardProgress(p *mcp.ProgressNotificationParams) {
	key, _ := p.ProgressToken.(string)
	mem.mu.Lock()
	w, ok := mem.progress[key]
	mem.mu.Unlock()
	if !ok {
		mem.log.Debug("progress for no request in flight, dropped", "token", p.ProgressToken)
		return
	}
	w.deadline.extend()
	up := *p
	up.ProgressToken = w.token
	if w.s == nil || w.s.isEnded() {
		return // no session, or it ended
	}
	mem.m.deliverFor(w.ctx, w.s, "notifications/progress", &up)
}
