package outq

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Queue holds what mux has to write to one agent, in order, and writes
// it from one goroutine, so that nobody waits on an agent that does not
// read. An agent that reads gets everything. What an agent that does not
// read (a write blocked for stallLimit, or coalesceAbove bytes queued) can
// make mux hold is bounded:
//   - responses (and mux's own requests to the agent) are never dropped;
//     there are at most MaxInflight of them, since the agent's requests are
//     not read beyond that;
//   - resources/updated is coalesced per URI (and subscription) while
//     queued: the agent only needs to know that the resource changed;
//   - list_changed is coalesced per list the same way;
//   - progress and log messages: at most maxDroppable queued, the oldest
//     dropped first;
//   - notifications in all: at most maxQueuedBytes; past that, updated,
//     progress and log messages are dropped (counted and logged).
//
// The same policy serves a session that is not stdio (notes.go), whose
// MaxInflight bounds the agent's requests that are read but not yet
// answered on stdout: an agent that writes requests and never reads the
// answers is not read from either once it has this many outstanding, so
// the replies queued raw (PushRaw) never exceed it.
const MaxInflight = 1024

// SendTimeout bounds the context of one notification sent through the
// go-sdk (SendLoop).
const SendTimeout = 5 * time.Second

// items are sent one by one through the go-sdk instead of written.
type Queue struct {
	w       io.Writer
	written func(jsonrpc.ID) // a response left for stdout
	log     *log.Logger

	mu         sync.Mutex
	items      []*item
	pending    map[string]*item // coalescing key → its queued item
	droppable  []*item          // queued progress and log messages, oldest first
	bytes      int              // queued notification bytes
	raw        int              // queued replies of the reader's own
	dead       int              // dropped items still in items
	dropped    int              // since the last log line about it
	lastLog    time.Time
	broken     bool   // a write failed: the agent is gone
	broke      func() // if set, called once when broken is set (not holding mu)
	writing    bool
	direct     bool          // a response is being written from its caller's goroutine (PushResponse)
	since      time.Time     // when the current write began
	stallAfter time.Duration // stallLimit; tests that must not see a stall lengthen it
	wake       chan struct{}
	room       chan struct{} // signalled when a raw reply went out
	// sending: a session's queue has a SendLoop running (notes.go).
	sending  bool
	dropWhat string // what the log says when notifications are dropped
	// taken is closed, and replaced, whenever the writer takes a batch
	// off the queue: what pace waits on.
	taken chan struct{}
	// maxBytes is the most notification bytes ever queued at once (tests).
	maxBytes int
}

type item struct {
	data      []byte
	size      int                         // what it counts against maxQueuedBytes
	send      func(context.Context) error // sends it, for a session's queue (data is nil)
	id        jsonrpc.ID                  // of a response, for written
	response  bool
	raw       bool
	key       string // coalescing key, "" if none
	droppable bool
	dead      bool // dropped while queued
}

const (
	coalesceAbove  = 4 << 20
	maxDroppable   = 1000
	maxQueuedBytes = 8 << 20
	maxWriteBatch  = 256 << 10
)

func New(w io.Writer, written func(jsonrpc.ID), logger *log.Logger) *Queue {
	return &Queue{
		w: w, written: written, log: logger,
		pending:    map[string]*item{},
		stallAfter: stallLimit,
		wake:       make(chan struct{}, 1),
		room:       make(chan struct{}, 1),
		taken:      make(chan struct{}),
		dropWhat:   "the agent is not reading stdout: notifications dropped",
	}
}

// OnBroken sets what q calls, once and not holding its lock, when a write
// fails (the agent is gone); set it before Loop starts.
func (q *Queue) OnBroken(f func()) { q.broke = f }

// push queues msg. It never blocks.
func (q *Queue) Push(msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Response); ok && r.Error == nil && len(r.Result) > 0 {
		// A result the go-sdk encoded already: encoding the response
		// would copy (and re-validate) all of it again.
		data, err := ResultLine(r.ID, r.Result)
		if err != nil {
			return err
		}
		q.PushResponse(r.ID, data)
		return nil
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	it := &item{data: append(data, '\n')}
	it.size = len(it.data)
	switch msg := msg.(type) {
	case *jsonrpc.Response:
		it.response, it.id = true, msg.ID
	case *jsonrpc.Request:
		if !msg.IsCall() {
			it.key, it.droppable = Classify(msg.Method, msg.Params)
		}
	}
	q.enqueue(it)
	return nil
}

// pushLine queues data, one notification's line, with its coalescing key
// and whether it may be dropped (see Classify). It never blocks.
func (q *Queue) PushLine(data []byte, key string, droppable bool) {
	q.enqueue(&item{data: data, size: len(data), key: key, droppable: droppable})
}

// ResultLine is the line of a response to id with result, compact JSON
// (as the go-sdk and backends write it): what jsonrpc.EncodeMessage makes of
// it, without copying result through an encoder.
func ResultLine(id jsonrpc.ID, result json.RawMessage) ([]byte, error) {
	idJSON, err := json.Marshal(id.Raw())
	if err != nil {
		return nil, err
	}
	result = bytes.TrimRight(result, " \t\r\n")
	data := make([]byte, 0, len(result)+len(idJSON)+40)
	data = append(data, `{"jsonrpc":"2.0","id":`...)
	data = append(data, idJSON...)
	data = append(data, `,"result":`...)
	data = append(data, result...)
	return append(data, "}\n"...), nil
}

// pushResponse queues data, the response to the agent's request id, as
// one line. It never blocks. With nothing but responses queued, nothing
// being written, and an agent's pipe that takes them whole at once, they
// are written from the caller's goroutine (writeNow), without waking the
// writer's.
func (q *Queue) PushResponse(id jsonrpc.ID, data []byte) {
	if q.hold(id, data) {
		q.writeNow()
	}
}

// HoldResponse queues data, the response to id, for the next
// PushResponse or Flush to write with whatever else is queued: a caller
// with more answers at hand gives them to the agent in one write. It
// never blocks.
func (q *Queue) HoldResponse(id jsonrpc.ID, data []byte) { q.hold(id, data) }

// FlushHeld writes what HoldResponse queued, as PushResponse would.
func (q *Queue) FlushHeld() { q.writeNow() }

// hold queues a response without waking the writer, and reports false if
// the agent is gone (the response is then dropped).
func (q *Queue) hold(id jsonrpc.ID, data []byte) bool {
	q.mu.Lock()
	if q.broken {
		q.mu.Unlock()
		q.written(id)
		return false
	}
	q.items = append(q.items, &item{data: data, size: len(data), response: true, id: id})
	q.mu.Unlock()
	return true
}

// directMax is the most writeNow writes at once: what a pipe takes whole
// (PIPE_BUF, wire.PipeAtomic), and so all its TryWrite writes.
const directMax = 4096

// writeNow writes what is queued from the caller's goroutine if it is
// responses alone, nothing is being written, and w takes them whole
// without waiting (a pipe's TryWrite: see wire.PipeIO); else it wakes the
// writer. It never blocks, so that a stalled agent holds only the
// writer's goroutine. The writer waits meanwhile, and is woken after for
// what was queued behind.
func (q *Queue) writeNow() {
	tw, ok := q.w.(interface{ TryWrite([]byte) (bool, error) })
	q.mu.Lock()
	var buf []byte
	n := 0
	if ok && !q.writing && !q.direct {
		for _, it := range q.items {
			if !it.response || len(buf)+len(it.data) > directMax {
				buf, n = nil, 0
				break
			}
			buf = append(buf, it.data...)
			n++
		}
	}
	if n == 0 {
		q.mu.Unlock()
		q.signal()
		return
	}
	q.direct = true // the writer takes nothing meanwhile: these stay first
	q.mu.Unlock()
	wrote, err := tw.TryWrite(buf)
	var broke func()
	var ids []jsonrpc.ID
	q.mu.Lock()
	q.direct = false
	if wrote {
		for i, it := range q.items[:n] {
			ids = append(ids, it.id)
			q.items[i] = nil
		}
		q.items = q.items[n:]
		if len(q.items) == 0 {
			q.items = nil
		}
	}
	if err != nil && !q.broken {
		q.broken = true
		broke = q.broke
		q.log.Debug("stdout closed", "err", err)
	}
	behind := len(q.items) > 0
	q.mu.Unlock()
	for _, id := range ids {
		q.written(id)
	}
	if broke != nil {
		broke()
	}
	if behind {
		q.signal()
	}
}

func (q *Queue) enqueue(it *item) {
	q.mu.Lock()
	if q.broken {
		q.mu.Unlock()
		if it.response {
			q.written(it.id)
		}
		return
	}
	if !it.response && !q.admit(it) {
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, it)
	q.mu.Unlock()
	q.signal()
}

// pushRaw queues a reply the reader wrote itself (to a line the SDK could
// not take). It waits while too many are queued: that holds the reader,
// and so an agent that sends garbage and reads nothing, back.
func (q *Queue) PushRaw(data []byte, closed <-chan struct{}) {
	for {
		q.mu.Lock()
		if q.broken {
			q.mu.Unlock()
			return
		}
		if q.raw < MaxInflight {
			q.raw++
			q.items = append(q.items, &item{data: data, raw: true})
			q.mu.Unlock()
			q.signal()
			return
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-closed:
			return
		}
	}
}

// Classify returns a notification's coalescing key (notifications with the
// same key say the same thing) and whether it may be dropped.
func Classify(method string, params json.RawMessage) (key string, droppable bool) {
	switch {
	case method == "notifications/resources/updated":
		var p struct {
			URI  string         `json:"uri"`
			Meta map[string]any `json:"_meta"`
		}
		if json.Unmarshal(params, &p) != nil {
			return "", true
		}
		return UpdatedKey(p.URI, p.Meta[mcp.MetaKeySubscriptionID]), true
	case strings.HasSuffix(method, "/list_changed"):
		return method + "\x00" + string(params), false
	case method == "notifications/progress" || method == "notifications/message":
		return "", true
	}
	return "", false
}

// UpdatedKey is the coalescing key of resources/updated for uri on the
// stream sub (nil in the handshake era).
func UpdatedKey(uri string, sub any) string {
	if sub == nil {
		return "updated\x00" + uri + "\x00"
	}
	return "updated\x00" + uri + "\x00" + fmt.Sprint(sub)
}

// admit decides whether a notification joins the queue, coalescing it or
// making room for it. Called with q.mu held.
func (q *Queue) admit(it *item) bool {
	pressed := q.bytes >= coalesceAbove || q.stalledLocked()
	if it.key != "" && pressed {
		if _, queued := q.pending[it.key]; queued {
			return false // the queued one says the same
		}
	}
	updated := strings.HasPrefix(it.key, "updated\x00")
	if it.droppable && !updated && pressed {
		for len(q.droppable) >= maxDroppable {
			q.dropOldest()
		}
	}
	for q.bytes+it.size > maxQueuedBytes && len(q.droppable) > 0 {
		q.dropOldest()
	}
	if it.droppable && q.bytes+it.size > maxQueuedBytes {
		q.noteDropped()
		return false
	}
	if it.key != "" {
		q.pending[it.key] = it
	}
	if it.droppable && !updated {
		q.droppable = append(q.droppable, it)
	}
	q.bytes += it.size
	q.maxBytes = max(q.maxBytes, q.bytes)
	return true
}

// paceAbove is how many bytes of notifications may wait for a stdio agent
// that reads them before the backend sending more waits (pace): two
// pipes' worth, and half of the writer's batch, so that one batch takes
// all that waits. Against 256 KiB in the same benchmark runs: peak RSS
// 25.0 and 25.0 MB against 25.2 and 25.3, the burst's rate the same.
const paceAbove = 128 << 10

// pace holds its caller, the reader of a backend whose notification is
// for a stdio agent, while more than paceAbove bytes of notifications wait
// for that agent and it is reading them: the backend is read at the pace
// the agent reads, as through a pipe, instead of its burst piling up in
// mux's memory (20,000 resources/updated from a backend had made mux hold
// 5-6 MB of them, a third of its RSS). Only while the agent reads: once a
// write is blocked for stallLimit the agent counts as not reading, pace
// returns, and the queue's bounds and coalescing apply as before, so a
// backend is never held by an agent that has stopped. Each wait is
// bounded by stallLimit too, and ends when mux does.
func (q *Queue) Pace(closed <-chan struct{}) {
	var t *time.Timer
	for {
		q.mu.Lock()
		if q.bytes <= paceAbove || q.broken || q.stalledLocked() {
			q.mu.Unlock()
			break
		}
		taken := q.taken
		q.mu.Unlock()
		if t == nil {
			t = time.NewTimer(q.stallAfter)
		} else {
			t.Reset(q.stallAfter)
		}
		select {
		case <-taken:
		case <-t.C:
			// Whether the writer is stalled (or the queue drained) is
			// looked at again.
		case <-closed:
			t.Stop()
			return
		}
	}
	if t != nil {
		t.Stop()
	}
}

func (q *Queue) dropOldest() {
	it := q.droppable[0]
	q.droppable = q.droppable[1:]
	it.dead = true
	q.bytes -= it.size
	it.data, it.send = nil, nil
	q.noteDropped()
	if q.dead++; q.dead > 64 && q.dead > len(q.items)/2 {
		q.compact()
	}
}

// compact removes dropped items, so that what a stalled agent costs is
// bounded by what is live.
func (q *Queue) compact() {
	live := q.items[:0]
	for _, it := range q.items {
		if !it.dead {
			live = append(live, it)
		}
	}
	clear(q.items[len(live):])
	q.items, q.dead = live, 0
}

// noteDropped counts a dropped notification, logging at most once a
// second: a stalled agent must not flood the log either.
func (q *Queue) noteDropped() {
	q.dropped++
	if time.Since(q.lastLog) >= time.Second {
		q.log.Warn(q.dropWhat, "count", q.dropped)
		q.dropped, q.lastLog = 0, time.Now()
	}
}

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// loop writes what is queued until closed. A write blocked on an agent
// that does not read blocks only this goroutine; it ends when the write
// does (at the latest when the process exits).
func (q *Queue) Loop(closed <-chan struct{}) {
	var buf []byte
	var ids []jsonrpc.ID
	for {
		select {
		case <-q.wake:
		case <-closed:
			return
		}
		for {
			buf, ids = q.take(buf[:0], ids[:0])
			if len(buf) == 0 {
				break
			}
			err := q.write(buf)
			for _, id := range ids {
				q.written(id)
			}
			var broke func()
			q.mu.Lock()
			q.writing = false
			if err != nil && !q.broken {
				q.broken = true
				broke = q.broke
				q.log.Debug("stdout closed", "err", err)
			}
			q.mu.Unlock()
			if broke != nil {
				broke()
			}
			select {
			case q.room <- struct{}{}:
			default:
			}
			if buf = buf[:0]; cap(buf) > 4*maxWriteBatch {
				buf = nil // a huge response once need not be held forever
			}
		}
	}
}

// writeChunk is what one Write call writes at most, about what a pipe
// holds: each chunk that goes out is progress, so a large batch to an
// agent that reads slowly is not taken for a stall.
const writeChunk = 32 << 10

// write writes buf in chunks, restarting the stall clock after each.
func (q *Queue) write(buf []byte) error {
	for len(buf) > 0 {
		n := min(len(buf), writeChunk)
		if _, err := q.w.Write(buf[:n]); err != nil {
			return err
		}
		buf = buf[n:]
		if len(buf) > 0 {
			q.mu.Lock()
			q.since = time.Now()
			q.mu.Unlock()
		}
	}
	return nil
}

// take moves the next batch of queued messages into buf, with the ids of
// the responses in it.
func (q *Queue) take(buf []byte, ids []jsonrpc.ID) ([]byte, []jsonrpc.ID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.direct {
		return buf, ids // writeNow wakes the writer when it is done
	}
	n := 0
	for n < len(q.items) && (len(buf) == 0 || len(buf)+len(q.items[n].data) <= maxWriteBatch) {
		it := q.items[n]
		q.items[n] = nil
		n++
		switch {
		case it.dead:
			q.dead--
			continue
		case it.response:
			ids = append(ids, it.id)
		case it.raw:
			q.raw--
		default:
			q.unqueue(it)
		}
		buf = append(buf, it.data...)
	}
	q.items = q.items[n:]
	if len(q.items) == 0 {
		q.items = nil // let the backing array go
	}
	q.writing = len(buf) > 0
	q.since = time.Now()
	if n > 0 {
		close(q.taken) // wakes pace
		q.taken = make(chan struct{})
	}
	return buf, ids
}

// unqueue does the accounting of a notification taken off the queue.
// Called with q.mu held.
func (q *Queue) unqueue(it *item) {
	q.bytes -= it.size
	if it.key != "" && q.pending[it.key] == it {
		delete(q.pending, it.key)
	}
	if it.droppable && len(q.droppable) > 0 && q.droppable[0] == it {
		q.droppable = q.droppable[1:]
	}
}

// stallLimit is how long one write (of at most writeChunk) may block
// before the agent counts as not reading.
const stallLimit = 200 * time.Millisecond

// stalled reports whether the agent is not reading: a write has been
// blocked for stallLimit.
func (q *Queue) Stalled() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stalledLocked()
}

func (q *Queue) stalledLocked() bool {
	return q.writing && time.Since(q.since) > q.stallAfter
}

// flush waits until everything queued is written, or d passed.
func (q *Queue) Flush(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		q.mu.Lock()
		idle := (len(q.items) == 0 && !q.writing) || q.broken || q.stalledLocked()
		q.mu.Unlock()
		if idle {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
