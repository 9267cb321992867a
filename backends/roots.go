package backends

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A server may ask for its client's roots as it starts, outside any request
// (server-filesystem started without directories does, as it is
// initialized), and act on the answer only later (server-filesystem checks
// each directory before it allows it). A request sent right after the
// backend's start, as the one that started it lazily is, then reaches a
// server that does not have its roots yet, and is refused. So mux asks
// AskedForRoots before a backend's requests, and waits SettleRoots when it
// did. Only what the backend asked before its first request counts: roots
// it asks for later (at a roots list_changed) it asks for while it serves,
// as with any client.

// rootsAnswerWait bounds how long SettleRoots waits for the answers to the
// backend's roots/list: what answers them has its own bounds.
const rootsAnswerWait = 10 * time.Second

// rootsAsks counts a backend's roots/list requests, as its stdout is read,
// and their answers.
type rootsAsks struct {
	once    sync.Once   // AskedForRoots's ping
	checked atomic.Bool // and it is done

	mu       sync.Mutex
	read     int
	answered int
	// start is what was read when the ping was answered (set once
	// checked), and startDone when as many were answered.
	start     int
	startDone time.Time
	changed   chan struct{} // closed (and made anew) when a count moves
}

func (r *rootsAsks) note(answer bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if answer {
		r.answered++
		if r.checked.Load() && r.answered == r.start {
			r.startDone = time.Now()
		}
	} else {
		r.read++
	}
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// AskedForRoots reports whether the backend, a child process, asked for
// roots before its first request. The first call sends it a ping, once per
// process, and waits for its answer: a server that asks as it is
// initialized has sent its roots/list before it answers anything else, and
// it is read before that answer. A remote backend reports false.
func (b *Backend) AskedForRoots(ctx context.Context) bool {
	b = b.real()
	if b.remote != nil || b.conn == nil || b.session == nil {
		return false
	}
	r := &b.conn.roots
	r.once.Do(func() {
		pctx, cancel := context.WithTimeout(ctx, rootsAnswerWait)
		defer cancel()
		pong := make(chan struct{})
		go func() { // owned: ends with pctx at the latest
			defer close(pong)
			b.session.Ping(pctx, nil) // its error is the request's to meet
		}()
		// A roots/list read ends the wait too: a server may answer
		// nothing else until it has its roots.
	wait:
		for {
			r.mu.Lock()
			asked := r.read > 0
			if r.changed == nil {
				r.changed = make(chan struct{})
			}
			changed := r.changed
			r.mu.Unlock()
			if asked {
				break
			}
			select {
			case <-pong:
				break wait
			case <-pctx.Done():
				break wait
			case <-changed:
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.start = r.read
		if r.answered >= r.start {
			r.startDone = time.Now()
		}
		r.checked.Store(true)
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start > 0
}

// SettleRoots waits until what the backend asked for before its first
// request (AskedForRoots) is answered (at most rootsAnswerWait), then until
// settle has passed since, for the backend to act on it.
func (b *Backend) SettleRoots(ctx context.Context, settle time.Duration) {
	b = b.real()
	if b.remote != nil || b.conn == nil || !b.conn.roots.checked.Load() {
		return
	}
	r := &b.conn.roots
	var limit <-chan time.Time
	for {
		r.mu.Lock()
		done := r.answered >= r.start
		at := r.startDone
		if !done && r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		if done {
			if wait := time.Until(at.Add(settle)); wait > 0 {
				t := time.NewTimer(wait)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
				}
			}
			return
		}
		if limit == nil {
			t := time.NewTimer(rootsAnswerWait)
			defer t.Stop()
			limit = t.C
		}
		select {
		case <-changed:
		case <-limit:
			return
		case <-ctx.Done():
			return
		}
	}
}

// RootsSettled reports, without waiting, whether a request may go to the
// backend at once: AskedForRoots was asked, and SettleRoots would return
// at once.
func (b *Backend) RootsSettled(settle time.Duration) bool {
	b = b.real()
	if b.remote != nil || b.conn == nil {
		return true
	}
	r := &b.conn.roots
	if !r.checked.Load() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start == 0 || r.answered >= r.start && time.Since(r.startDone) >= settle
}

// rootsAnswered counts an answer to the backend's roots/list.
func (b *Backend) rootsAnswered() { b.conn.roots.note(true) }
