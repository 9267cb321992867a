package mux

import (
	"context"
	"sync"
	"time"
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

// track records that the request of ctx's session, bounded by d, is in
// flight to mem until the returned func is called.
func (mem *member) track(ctx context.Context, d *deadline) (done func()) {
	s := sessionFrom(ctx)
	if s == nil {
		return func() {}
	}
	c := &inflightCall{s: s, d: d, start: time.Now(), ctx: ctx}
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
