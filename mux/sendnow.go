package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/door"
)

// The reader's own path: a stdio agent's tools/call or resources/read that
// nothing of forward's changes on its way (the agent's _meta goes as sent:
// no progress token of mux's, no trace, both sides of the handshake era)
// is written to its backend by the agent's reader itself, and answered to
// the agent by the reader of the backend's stdout, as a byte relay's two
// copies would. Through forward it took a goroutine per request and three
// hand-offs (reader, handler, backend's reader, handler again), and
// forward's preparations before the backend could start on it: 12-21 µs
// from the agent's line to the backend, and 10-15 µs back, where the relay
// spends a read and a write each way. The lines the agent sent together
// go to a backend in one write once the reader has handled them all
// (idle), as the relay copies what one read gave; the reader never waits
// on a backend's pipe (Backend.SendLines).
//
// What forward does for such a request is done here, in an order that
// keeps it right when the answer overtakes the bookkeeping: the deadline
// and the tracking (which the backend's requests to the agent meanwhile
// look for) begin before the write; the answer waits for what the backend
// sent before it (settle), is finished as forward's would be (finishResult)
// and written; what is recorded of the request (status, metrics, the audit
// log) and the end of its contexts follow. A cancellation or the deadline
// ends it from the context's side (cancelled), and whichever side takes
// the call back from the backend's connection first (SentCall.Claim)
// answers the agent, exactly once. Anything else takes forward
// (passThrough.send's goroutine).

// sentNow is one request of the reader's own path.
type sentNow struct {
	p      *passThrough
	id     jsonrpc.ID
	pr     passable
	in     inbound         // for what is recorded of it (observed)
	ctx    context.Context // ends when the agent cancels, the deadline passes, or the session ends
	d      *deadline
	end    func() // ends ctx and the deadline's timer
	untrac func()
	stop   atomic.Pointer[func() bool] // stops cancelled's watch of ctx
	sc     *backends.SentCall
}

// sendNow takes req (as pr) on the reader's own path, and reports whether
// it did: its line goes to the backend at the reader's next idle, and the
// answer reaches the agent without another goroutine of mux's in between.
func (p *passThrough) sendNow(req *jsonrpc.Request, call *door.Call, pr passable) bool {
	m, mem, s := p.m, pr.mem, p.s
	if pr.meta != nil || m.tracer != nil || s.isModern() || pr.b.Modern() || m.refuseUnaudited(req.Method) != nil {
		return false
	}
	if s.declared(hasRoots) && !pr.b.RootsSettled(rootsSettle) {
		return false // forward waits for the roots the backend asked for as it started
	}
	r := &sentNow{p: p, id: req.ID, pr: pr}
	if r.sc = pr.b.NewSentCall(r.answered); r.sc == nil || !m.own() {
		return false
	}
	ctx, endCall := p.begin(call)
	ctx, d, endDeadline := m.withDeadline(ctx, mem, nil)
	r.ctx, r.d = m.withCancelReason(ctx, mem, call.Extra()), d
	r.end = func() { endDeadline(); endCall() }
	r.in = inbound{ss: s.ss, extra: call.Extra(), method: req.Method, target: pr.target, start: time.Now()}
	for _, f := range pr.fields {
		if f.key == "arguments" {
			r.in.args = f.value // for the audit log's names of them
		}
	}
	r.untrac = mem.track(r.ctx, d, nil, "")
	// Every field but stop is set before the call is registered: from
	// then on the connection's end (answered) may finish it, and once ctx
	// is watched, a cancellation.
	if !r.sc.Register(r.ctx) {
		r.untrac()
		r.end()
		m.wg.Done()
		return false
	}
	stop := context.AfterFunc(r.ctx, r.cancelled)
	r.stop.Store(&stop)
	p.hold(pr.b, r.sc.Line(req.Method, paramsObject(pr.rawMeta, pr.fields)))
	return true
}

// held is the lines for one backend that the reader holds until it has
// handled all it read (idle).
type held struct {
	b     *backends.Backend
	lines []byte
}

// hold keeps line, a request for b, for the next idle: requests the agent
// sent together go to their backend in one write, as the relay copies
// them, where a write each cost a system call and a wake-up of the
// backend each.
func (p *passThrough) hold(b *backends.Backend, line []byte) {
	for i := range p.held {
		if p.held[i].b == b {
			p.held[i].lines = append(p.held[i].lines, line...)
			return
		}
	}
	p.held = append(p.held, held{b, line})
}

// idle writes what the reader held back (Backend.SendLines never waits):
// the door calls it once it handled all it read, before it may wait.
func (p *passThrough) idle() {
	for i, h := range p.held {
		h.b.SendLines(h.lines)
		p.held[i] = held{}
	}
	p.held = p.held[:0]
}

// answered gets the backend's answer (nil: its connection ended first),
// on the reader of its stdout.
func (r *sentNow) answered(resp *jsonrpc.Response) {
	if stop := r.stop.Load(); stop != nil { // nil: the connection ended before it was set
		(*stop)()
	}
	res, err := r.sc.Result(r.in.method, resp)
	if resp == nil {
		// From the connection's end, which may be under a lock of the
		// backend's stop: answered from a goroutine of its own.
		go r.finish(res, err, false)
		return
	}
	if err == nil {
		if _, _, ask := inputOf(res); ask {
			// A result that asks the agent for input (which a backend
			// of the handshake era should not send): the agent's answers
			// take a while, and another call.
			go func() { res, err := r.rounds(res); r.finish(res, err, false) }()
			return
		}
	}
	r.finish(res, err, true)
}

// cancelled ends the request when its context does (the agent cancelled
// it, the deadline passed, the session ended) before the answer came: the
// backend is told, and the agent answered as forward would.
func (r *sentNow) cancelled() {
	if !r.sc.Claim() {
		return // answered
	}
	r.sc.Cancel(r.ctx)
	r.finish(nil, r.ctx.Err(), false)
}

// finish answers the agent with res or err, as forward and send would,
// then records the request and ends it. On the backend's reader, with
// more of the backend's lines read already, a result waits for them
// (HoldRaw), and the answers they bring go to the agent in one write: the
// reader flushes them before it next may wait.
func (r *sentNow) finish(res json.RawMessage, err error, onReader bool) {
	p, m, mem, s := r.p, r.p.m, r.pr.mem, r.p.s
	method := r.in.method
	if err != nil {
		err = m.backendError(r.ctx, mem, r.pr.b, err)
		if method == "resources/read" {
			err = notFoundInEra(err, s)
		}
		p.respond(r.id, nil, err)
	} else {
		m.settle(r.ctx, r.pr.b)
		if method == "tools/call" {
			m.calledTool(s, r.pr.target)
		}
		res := m.finishResult(s, mem, method, res)
		if onReader && r.sc.MoreToRead() {
			p.c.HoldRaw(r.id, res)
			r.sc.FlushAtIdle(p.c, p.c.FlushHeld)
		} else {
			p.respond(r.id, res, nil)
		}
	}
	m.stats.observe(mem.spec.Name, r.in.start, &err)
	m.observed(r.ctx, mem, &r.in, res, err)
	if _, ok := s.used.Load(mem.spec.Name); !ok {
		s.used.Store(mem.spec.Name, true)
	}
	r.untrac()
	r.end()
	m.wg.Done()
}

// rounds asks the agent for the input res asks for, and calls again with
// its answers, as forward's run does for an agent of the handshake era.
func (r *sentNow) rounds(res json.RawMessage) (json.RawMessage, error) {
	m, mem, s := r.p.m, r.pr.mem, r.p.s
	for n := 0; ; n++ {
		reqs, state, ok := inputOf(res)
		if !ok {
			return res, nil
		}
		if n == maxRounds {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("backend %q asked for input %d times in one request: mcp-mux gave up", mem.spec.Name, maxRounds)}
		}
		responses, err := m.askAgent(r.ctx, mem, s, reqs)
		if err != nil {
			return nil, err
		}
		answers, err := json.Marshal(responses)
		if err != nil {
			return nil, err
		}
		st, _ := json.Marshal(state)
		params := append(append([]param{}, r.pr.fields...), param{"inputResponses", answers}, param{"requestState", st})
		if res, err = r.pr.b.CallRaw(r.ctx, r.in.method, paramsObject(r.pr.rawMeta, params)); err != nil {
			return nil, err
		}
	}
}
