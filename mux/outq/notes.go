package outq

import (
	"context"
	"encoding/json"
	"time"

	"github.com/charmbracelet/log"
)

// A session that is not stdio (every HTTP session) gets mux's own
// notifications through a queue of its own, sent by a goroutine of its own
// through the go-sdk. The go-sdk writes each to the agent's event stream
// and blocks for as long as the agent does not read (a context does not end
// that write), so this is what keeps one agent that stopped reading from
// holding up the other sessions, or the backend whose notification
// dispatch delivers to it. The policy is the stdio one (Queue):
// lossless while the agent reads, coalesced and bounded while it does not.

// sseFraming is what an event stream adds to a notification's params
// (jsonrpc, method, the event's own lines), counted against the bound.
const sseFraming = 64

// NewNotes makes a session's queue; sendLoop sends what it holds.
func NewNotes(logger *log.Logger, sid string) *Queue {
	q := New(nil, nil, logger)
	q.dropWhat = "an agent is not reading its HTTP event stream: notifications dropped (session " + sid + ")"
	return q
}

// pushNote queues a notification of method with params, which send sends.
// It never blocks. start reports that no sendLoop runs for what it
// queued: the caller starts one.
func (q *Queue) PushNote(method string, params any, send func(context.Context) error) (start bool, err error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return false, err
	}
	it := &item{size: len(method) + len(raw) + sseFraming, send: send}
	it.key, it.droppable = Classify(method, raw)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.broken || !q.admit(it) {
		return false, nil
	}
	q.items = append(q.items, it)
	start = !q.sending
	q.sending = true
	return start, nil
}

// sendLoop sends what is queued, in order, and returns once the queue is
// empty (pushNote asks for another then), or at close, or when ctx ends:
// an idle session holds no goroutine for it. A send that blocks on an
// agent that does not read blocks only this goroutine, until the write
// fails (the connection closes or its deadline passes).
func (q *Queue) SendLoop(ctx context.Context) {
	for {
		it := q.takeOne()
		if it == nil {
			return // takeOne saw the queue empty: not sending any more
		}
		sctx, cancel := context.WithTimeout(ctx, SendTimeout)
		err := it.send(sctx)
		cancel()
		q.mu.Lock()
		q.writing = false
		stopped := q.broken || ctx.Err() != nil
		if stopped {
			q.sending = false
		}
		q.mu.Unlock()
		if err != nil {
			q.log.Debug("notification not delivered", "err", err)
		}
		if stopped {
			return
		}
	}
}

// takeOne takes the next live notification off the queue, marking the
// send begun (for stall detection).
func (q *Queue) takeOne() *item {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) > 0 {
		it := q.items[0]
		q.items[0] = nil
		q.items = q.items[1:]
		if it.dead {
			q.dead--
			continue
		}
		q.unqueue(it)
		q.writing, q.since = true, time.Now()
		return it
	}
	q.items = nil // let the backing array go
	q.sending = false
	return nil
}

// close drops what is queued; sendLoop returns after the send under way,
// if any: the session ended.
func (q *Queue) Close() {
	q.mu.Lock()
	if q.broken {
		q.mu.Unlock()
		return
	}
	q.broken = true
	q.items, q.droppable, q.bytes, q.dead = nil, nil, 0, 0
	clear(q.pending)
	q.mu.Unlock()
}
