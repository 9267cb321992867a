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
// AskedForRoots before such a backend's first request, and waits
// SettleRoots when it did.

// rootsAnswerWait bounds how long SettleRoots waits for the answers to the
// backend's roots/list: what answers them has its own bounds.
const rootsAnswerWait = 10 * time.Second

// rootsAsks counts a backend's roots/list requests, as its stdout is read,
// and their answers.
type rootsAsks struct {
	mu         sync.Mutex
	read       int
	answered   int
	answeredAt time.Time     // of the last answer
	changed    chan struct{} // closed (and made anew) when either count moves
	once       sync.Once     // AskedForRoots's ping
	checked    atomic.Bool   // and it is done
}

func (r *rootsAsks) note(answer bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if answer {
		r.answered++
		r.answeredAt = time.Now()
	} else {
		r.read++
	}
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// state is the counts and a channel closed when they next move.
func (r *rootsAsks) state() (read, answered int, at time.Time, changed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.read, r.answered, r.answeredAt, r.changed
}

// AskedForRoots reports whether the backend, a child process, has asked
// for roots before now. The first call sends it a ping, once per process,
// and waits for its answer (or for a roots/list): a server that asks as it
// is initialized has sent its roots/list before it answers anything else,
// and it is read before the answer. A remote backend reports false.
func (b *Backend) AskedForRoots(ctx context.Context) bool {
	b = b.real()
	if b.remote != nil || b.conn == nil || b.session == nil {
		return false
	}
	r := &b.conn.roots
	r.once.Do(func() {
		defer r.checked.Store(true)
		pctx, cancel := context.WithTimeout(ctx, rootsAnswerWait)
		defer cancel()
		pong := make(chan struct{})
		go func() { // owned: ends with pctx at the latest
			defer close(pong)
			b.session.Ping(pctx, nil)
		}()
		for {
			read, _, _, changed := r.state()
			if read > 0 {
				return
			}
			select {
			case <-pong:
				return
			case <-changed:
			case <-pctx.Done():
				return
			}
		}
	})
	read, _, _, _ := r.state()
	return read > 0
}

// SettleRoots waits until each roots/list the backend sent so far has
// been answered (at most rootsAnswerWait), then until settle has passed
// since the last answer, for the backend to act on it.
func (b *Backend) SettleRoots(ctx context.Context, settle time.Duration) {
	b = b.real()
	if b.remote != nil || b.conn == nil {
		return
	}
	r := &b.conn.roots
	limit := time.NewTimer(rootsAnswerWait)
	defer limit.Stop()
	for {
		read, answered, at, changed := r.state()
		if answered >= read {
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
		select {
		case <-changed:
		case <-limit.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// rootsAnswered counts an answer to the backend's roots/list.
func (b *Backend) rootsAnswered() { b.conn.roots.note(true) }

// RootsSettled reports, without waiting, whether a request may go to the
// backend at once: AskedForRoots was asked, and what it found needs no
// wait (SettleRoots would return at once).
func (b *Backend) RootsSettled(settle time.Duration) bool {
	b = b.real()
	if b.remote != nil || b.conn == nil {
		return true
	}
	r := &b.conn.roots
	if !r.checked.Load() {
		return false
	}
	read, answered, at, _ := r.state()
	return read == 0 || answered >= read && time.Since(at) >= settle
}
