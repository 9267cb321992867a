package mux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
)

// Every agent request that a backend answers goes through forward, whichever
// path it came by (the go-sdk's typed handlers in route.go and
// subscriptions.go, or the stdio pass-through's bytes in passthrough.go):
// the callers find the owner and say how to call it; forward does the rest,
// in this order:
//
//  1. the backend that is up now (or an error naming it and its state);
//  2. a deadline: request_timeout, extended by the backend's progress up to
//     max_request_time, paused while the agent answers the backend;
//  3. tracking: the request is in flight to that backend for its agent
//     session, so the backend's own requests meanwhile (sampling,
//     elicitation, roots) go to that session, on that request's stream;
//  4. the reason for a cancellation (the agent's own, or mux's timeout),
//     which the backend is told with notifications/cancelled;
//  5. a progress token of mux's in place of the agent's, its progress
//     routed back under the agent's token;
//  6. the call;
//  7. errors mapped to what the agent can read (the backend's own JSON-RPC
//     error unchanged, a timeout or a crash naming the backend; a timeout
//     also checks the backend for life);
//  8. settling: what the backend sent before its response reaches the agent
//     before the response does.

// inbound is what forward needs of the agent's request.
type inbound struct {
	ss    *mcp.ServerSession
	extra *mcp.RequestExtra // where the agent's reason for a cancellation is found
	meta  mcp.Meta          // the agent's _meta: its progress token is replaced
}

// forward runs one agent request at mem's backend: call sends it, with the
// context bounded as above and the _meta to send (the agent's, with mux's
// progress token in place of its own).
func forward[R any](ctx context.Context, m *Mux, mem *member, in inbound,
	call func(ctx context.Context, b *backends.Backend, meta mcp.Meta) (R, error)) (R, error) {
	var zero R
	b, err := mem.backend()
	if err != nil {
		return zero, toAgentError(mem, err)
	}
	ctx, d, cancel := m.withDeadline(ctx, mem)
	defer cancel()
	defer mem.track(ctx, d)()
	ctx = m.withCancelReason(ctx, mem, in.extra)
	meta, done := mem.awaitProgress(ctx, in.meta, in.ss, d)
	defer done()
	res, err := call(ctx, b, meta)
	if err != nil {
		return zero, m.backendError(ctx, mem, b, err)
	}
	m.settle(ctx, b)
	return res, nil
}

// settleWait bounds how long a response waits for the backend's
// notifications sent before it to reach the agent first (see settle).
const settleWait = 100 * time.Millisecond

// settle waits (bounded) until what b sent before its response to the
// agent's request of ctx has reached the agent: handled by mux
// (Backend.Settle), and for a session with a queue of its own (HTTP), sent
// from it, since the go-sdk writes the response itself, past that queue.
func (m *Mux) settle(ctx context.Context, b *backends.Backend) {
	start := time.Now()
	b.Settle(settleWait)
	s := sessionFrom(ctx)
	if s == nil || s.conn.Load() != nil {
		return
	}
	s.mu.Lock()
	q := s.notes
	s.mu.Unlock()
	if q != nil {
		q.flush(settleWait - time.Since(start))
	}
}

// errTimedOut is the cause of a forwarded request's context that ran out
// of time (rather than being cancelled by the agent).
var errTimedOut = errors.New("request timed out")

// deadline bounds one forwarded request by the backend's request_timeout.
// Progress from the backend extends it (long tools keep working), but never
// past max_request_time after the start.
type deadline struct {
	mu      sync.Mutex
	timer   *time.Timer
	start   time.Time
	timeout time.Duration
	max     time.Duration
	paused  int // the agent is answering a request of the backend: see pauseDeadlines
}

// withDeadline derives the context of one forwarded request. When it runs
// out, the go-sdk sends the backend notifications/cancelled.
func (m *Mux) withDeadline(ctx context.Context, mem *member) (context.Context, *deadline, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	d := &deadline{start: time.Now(), timeout: m.requestTimeout(mem), max: max(m.cfg.Mux.MaxRequestTime.Duration, m.requestTimeout(mem))}
	d.timer = time.AfterFunc(d.timeout, func() { cancel(errTimedOut) })
	return ctx, d, func() {
		d.timer.Stop()
		cancel(context.Canceled)
	}
}

func (d *deadline) extend() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused > 0 {
		return
	}
	left := d.max - time.Since(d.start)
	d.timer.Reset(max(0, min(d.timeout, left)))
}

func (d *deadline) pause() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paused++
	d.timer.Reset(max(0, d.max-time.Since(d.start)))
}

func (d *deadline) resume() {
	d.mu.Lock()
	d.paused--
	running := d.paused == 0
	d.mu.Unlock()
	if running {
		d.extend()
	}
}

// withCancelReason makes the reason a forwarded request is cancelled with at
// the backend the agent's own (when it cancelled its request and said why)
// or mux's timeout, instead of the go-sdk's "context canceled".
func (m *Mux) withCancelReason(ctx context.Context, mem *member, extra *mcp.RequestExtra) context.Context {
	return backends.WithCancelReason(ctx, func() string {
		if r, ok := agentCancelReasons.Load(extra); ok {
			return r.(string)
		}
		if context.Cause(ctx) == errTimedOut {
			return fmt.Sprintf("mcp-mux: request_timeout (%s) passed", m.requestTimeout(mem))
		}
		return ""
	})
}

// backendError turns what a backend call returned into what the agent gets:
// the backend's own JSON-RPC error unchanged (code, message, data), a
// timeout naming the backend, or -32603 naming the backend. A plain Go error
// would go out with code 0, which no client understands. After a timeout
// the backend is checked for life: a hung one is restarted.
func (m *Mux) backendError(ctx context.Context, mem *member, b *backends.Backend, err error) error {
	if context.Cause(ctx) == errTimedOut {
		m.goOwned(func() { mem.checkAlive(b) })
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("backend %q timed out after %s", mem.spec.Name, m.requestTimeout(mem))}
	}
	return toAgentError(mem, err)
}

// toAgentError is err, from mem or about it, as a JSON-RPC error.
func toAgentError(mem *member, err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return &jsonrpc.Error{Code: je.Code, Message: je.Message, Data: je.Data}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("backend %q went down during the request (it is being restarted): %v", mem.spec.Name, err)}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("backend %q: %v", mem.spec.Name, err)}
}

func (m *Mux) requestTimeout(mem *member) time.Duration {
	if d := mem.spec.RequestTimeout.Duration; d > 0 {
		return d
	}
	return m.settings().RequestTimeout.Duration
}
