package mux

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A backend's request to its client (sampling inside a tools/call) carries
// nothing that ties it to the request it serves. What ties it is timing:
// the agent session with a request in flight to that backend when it asks.
// Each forwarding function registers its request here for its duration.

// inflight is the requests in flight to one backend.
type inflight struct {
	mu    sync.Mutex
	calls map[*inflightCall]struct{}
}

type inflightCall struct {
	s     *session
	d     *deadline
	pc    *parkedCall      // the request is parked: the backend's requests to the agent go through it
	level mcp.LoggingLevel // the log messages a current-era request asked for ("" none)
	start time.Time
	// ctx is the agent's request's: over HTTP its values tell the go-sdk
	// which response stream a message about that request goes on.
	ctx context.Context
}

// sessionKey carries the agent's *session in a request's context (set by
// agentContext), so that forwarding functions that get only params know it.
type sessionKey struct{}

func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	return s
}

// track records that the request of ctx's session, bounded by d (and
// parked as pc, if it is; asking for log messages of level and above, in
// the current era), is in flight to mem until the returned func is called.
func (mem *member) track(ctx context.Context, d *deadline, pc *parkedCall, level mcp.LoggingLevel) (done func()) {
	s := sessionFrom(ctx)
	if s == nil {
		return func() {}
	}
	c := &inflightCall{s: s, d: d, pc: pc, level: level, start: time.Now(), ctx: ctx}
	in := &mem.inflight
	in.mu.Lock()
	if in.calls == nil {
		in.calls = map[*inflightCall]struct{}{}
	}
	in.calls[c] = struct{}{}
	in.mu.Unlock()
	return func() {
		in.mu.Lock()
		delete(in.calls, c)
		in.mu.Unlock()
		mem.lastUse.Store(time.Now().UnixNano()) // idle_stop counts from here
	}
}

// requestContext is the context of s's latest request in flight to mem,
// or nil.
func (mem *member) requestContext(s *session) context.Context {
	in := &mem.inflight
	in.mu.Lock()
	defer in.mu.Unlock()
	var latest *inflightCall
	for c := range in.calls {
		if c.s == s && (latest == nil || c.start.After(latest.start)) {
			latest = c
		}
	}
	if latest == nil {
		return nil
	}
	return latest.ctx
}

// valuesOf is ctx (its deadline and cancellation) with the values of
// another context: an agent's request's, whose values tell the go-sdk's
// HTTP transport to send a message on that request's response stream,
// where a client that opened no other stream expects it.
type valuesOf struct {
	context.Context
	values context.Context
}

func (c valuesOf) Value(key any) any { return c.values.Value(key) }

// sessionsInFlight lists the sessions with a request in flight to mem.
func (mem *member) sessionsInFlight() []*session {
	in := &mem.inflight
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []*session
	seen := map[*session]bool{}
	for c := range in.calls {
		if !seen[c.s] {
			seen[c.s] = true
			out = append(out, c.s)
		}
	}
	return out
}

// pauseDeadlines stops the request_timeout of s's requests in flight to
// mem while the agent answers a request of that backend (a human may take
// minutes over an elicitation); max_request_time still bounds them. The
// returned func restarts them, each with a full request_timeout.
func (mem *member) pauseDeadlines(s *session) (resume func()) {
	in := &mem.inflight
	in.mu.Lock()
	var ds []*deadline
	for c := range in.calls {
		if c.s == s && c.d != nil {
			ds = append(ds, c.d)
		}
	}
	in.mu.Unlock()
	for _, d := range ds {
		d.pause()
	}
	return func() {
		for _, d := range ds {
			d.resume()
		}
	}
}

// parkedCallFor is the request in flight to mem, parked for an agent of
// the current era that declared what capName needs, that the backend's
// request to the agent belongs to: the oldest that is not waiting for the
// agent's answers already (a backend serves one request's round at a
// time), else the newest. Nil if there is none.
func (mem *member) parkedCallFor(capName string, has func(*mcp.ClientCapabilities) bool) *inflightCall {
	in := &mem.inflight
	in.mu.Lock()
	var calls []*inflightCall
	for c := range in.calls {
		if c.pc != nil {
			calls = append(calls, c)
		}
	}
	in.mu.Unlock()
	var idle, busy *inflightCall
	for _, c := range calls {
		if !c.s.declared(has) {
			continue
		}
		c.pc.mu.Lock()
		asking := len(c.pc.open) > 0
		c.pc.mu.Unlock()
		switch {
		case !asking && (idle == nil || c.start.Before(idle.start)):
			idle = c
		case asking && (busy == nil || c.start.After(busy.start)):
			busy = c
		}
	}
	if idle != nil {
		return idle
	}
	return busy
}

// loggingRequest is the context of the latest request of s (of the current
// era) in flight to mem that asked for log messages of level, if any.
func (mem *member) loggingRequest(s *session, level mcp.LoggingLevel) (context.Context, bool) {
	in := &mem.inflight
	in.mu.Lock()
	defer in.mu.Unlock()
	var latest *inflightCall
	for c := range in.calls {
		if c.s == s && c.level != "" && levelRank[level] >= levelRank[c.level] && (latest == nil || c.start.After(latest.start)) {
			latest = c
		}
	}
	if latest == nil {
		return nil, false
	}
	return latest.ctx, true
}
