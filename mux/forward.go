package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/door"
)

// Every agent request that a backend answers goes through forward, whichever
// path it came by (the go-sdk's typed handlers in route.go and
// subscriptions.go, or the stdio pass-through's bytes in passthrough.go),
// but for those the stdio pass-through sends itself because none of this
// changes them (sendnow.go, which does the same for them): the callers
// find the owner and say how to call it; forward does the rest, in this
// order:
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
//  6. the _meta of the backend's own session in place of the agent's
//     (backendMeta), and the call;
//  7. the protocol eras bridged: a backend's requests for the agent's input
//     asked the way the agent's era has (rounds.go);
//  8. errors mapped to what the agent can read (the backend's own JSON-RPC
//     error unchanged, a timeout or a crash naming the backend; a timeout
//     also checks the backend for life);
//  9. settling: what the backend sent before its response reaches the agent
//     before the response does.

// inbound is what forward needs of the agent's request.
type inbound struct {
	ss     *mcp.ServerSession // nil for a stateless request on the HTTP fast path
	client string             // then, the name its _meta gave
	extra  *mcp.RequestExtra  // where the agent's reason for a cancellation is found
	meta   mcp.Meta           // the agent's _meta: its progress token is replaced
	method string
	target string // the tool or prompt name, or the URI: what a requestState of mux's is bound to
	via    string // the wrapper a tool was called through, if any (wrappers.go)
	round  *round // the answers and requestState of a retry (rounds.go), if it is one
	// For what mux records of it (observe.go): when forward began, and
	// the arguments of a tool or prompt as the agent sent them.
	start time.Time
	args  json.RawMessage
}

// forward runs one agent request at mem's backend: call sends it, with the
// context bounded as above, the _meta to send (backendMeta), and the round
// of input answers to add, if any.
func forward[R any](ctx context.Context, m *Mux, mem *member, in inbound,
	call func(ctx context.Context, b *backends.Backend, meta mcp.Meta, r *round) (R, error)) (_ R, err error) {
	var zero R
	if err := m.refuseUnaudited(in.method); err != nil {
		return zero, err
	}
	in.start = time.Now()
	defer m.stats.observe(mem.spec.Name, in.start, &err) // for mcp-mux status (stats.go), however it ends
	if in.round != nil {
		pc, err := m.parked.claim(in)
		if err != nil {
			return zero, err
		}
		if pc != nil { // the retry of a request mux parked for the agent's input
			return awaitParked[R](ctx, m, pc, in)
		}
	}
	b, err := mem.backendForUseNoting(ctx, m.startNotice(ctx, mem, in.meta)) // started if it was not running (lazy.go)
	if err != nil {
		err = toAgentError(mem, err)
		failed := in // a copy: &in would move in to the heap for every request
		m.observed(ctx, mem, &failed, nil, err)
		return zero, err
	}
	s := sessionFrom(ctx)
	// A backend that asked for roots as it started acts on them only once
	// it has them: the request waits for that (roots.go).
	startRoots := s != nil && s.declared(hasRoots) && b.AskedForRoots(ctx)
	if s != nil && s.isModern() && !b.Modern() && multiRound(in.method) {
		// The backend may ask the agent for input while it serves the
		// request, which the agent's era has no way for: the request is
		// parked, so that it can go on across the agent's retries.
		askRoots := s.declared(hasRoots) && (m.roots.wantedBy(mem) || startRoots && m.roots.known() == nil)
		pc, err := m.park(ctx, in, func(ctx context.Context, pc *parkedCall) (any, error) {
			if askRoots {
				// The backend asked for roots outside any request (roots.go).
				m.askRoots(ctx, pc)
			}
			if startRoots {
				b.SettleRoots(ctx, rootsSettle)
			}
			return traced(ctx, m, mem, b, in, pc, call) // traces.go
		})
		if err != nil {
			return zero, err
		}
		return awaitParked[R](ctx, m, pc, in)
	}
	if startRoots && (!s.isModern() || m.roots.known() != nil) {
		// (An agent of the current era gives roots only in an input round,
		// which this request has none of.)
		b.SettleRoots(ctx, rootsSettle)
	}
	return traced(ctx, m, mem, b, in, nil, call) // run, in a span when tracing is on (traces.go)
}

// run is forward's pipeline at b, for a request parked as pc or not.
func run[R any](ctx context.Context, m *Mux, mem *member, b *backends.Backend, in inbound, pc *parkedCall,
	call func(ctx context.Context, b *backends.Backend, meta mcp.Meta, r *round) (R, error)) (res R, err error) {
	var zero R
	ctx, d, cancel := m.withDeadline(ctx, mem, pc)
	defer cancel()
	defer func() { m.observed(ctx, mem, &in, rawResult(res), err) }() // before cancel: its cause is the timeout's
	if pc != nil {
		pc.mu.Lock()
		pc.d = d
		pc.mu.Unlock()
	}
	s := sessionFrom(ctx)
	if s != nil {
		if _, ok := s.used.Load(mem.spec.Name); !ok { // a Store on every request would write every time
			s.used.Store(mem.spec.Name, true)
		}
	}
	var level mcp.LoggingLevel
	if s != nil && s.isModern() {
		level = s.requestLogLevel(in.meta)
		mem.ensureLogLevel(ctx, b, level)
	}
	defer mem.track(ctx, d, pc, level)()
	ctx = m.withCancelReason(ctx, mem, in.extra)
	meta, done := mem.awaitProgress(ctx, in.meta, s, d)
	defer done()
	meta = m.backendMeta(b, s, meta)
	res, err = call(ctx, b, meta, in.round)
	// A backend of the current era that needs input a handshake-era agent
	// cannot be asked for in a result: mux asks the agent itself.
	for n := 0; err == nil && s != nil && !s.isModern(); n++ {
		reqs, state, ok := inputOf(res)
		if !ok {
			break
		}
		if n == maxRounds {
			return zero, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("backend %q asked for input %d times in one request: mcp-mux gave up", mem.spec.Name, maxRounds)}
		}
		responses, aerr := m.askAgent(ctx, mem, s, reqs)
		if aerr != nil {
			return zero, aerr
		}
		res, err = call(ctx, b, meta, &round{responses: responses, state: state})
	}
	if err != nil {
		err = m.backendError(ctx, mem, b, err)
		if in.method == "resources/read" {
			err = notFoundInEra(err, s)
		}
		return zero, err
	}
	m.settle(ctx, b)
	return res, nil
}

// rawResult is res if it is the backend's result as bytes, else nil.
func rawResult[R any](res R) json.RawMessage {
	raw, _ := any(res).(json.RawMessage)
	return raw
}

// notFoundInEra is err, a backend's error for a read, with the code of
// "resource not found" the agent's era has (-32002 in the handshake era,
// -32602 in the current one), whichever the backend sent.
func notFoundInEra(err error, s *session) error {
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return err
	}
	notFound := je.Code == CodeResourceNotFound ||
		(je.Code == jsonrpc.CodeInvalidParams && strings.Contains(strings.ToLower(je.Message), "not found"))
	if !notFound {
		return err
	}
	code := int64(CodeResourceNotFound)
	if s != nil && s.isModern() {
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: je.Message, Data: je.Data}
}

// reservedMetaPrefix starts the _meta keys the protocol reserves for
// itself: they describe one session, so each side gets its own.
const reservedMetaPrefix = "io.modelcontextprotocol/"

// backendMeta is the _meta a backend gets with a request: the agent's,
// without the protocol's own keys, which describe the agent's session with
// mux. A backend of the handshake era gets none of them; one of the
// current era gets those of mux's session with it: the version they speak,
// mux's name, what the agent can answer (rounds.go translates) and the log
// level the agent wants of this request. meta is not changed.
func (m *Mux) backendMeta(b *backends.Backend, s *session, meta mcp.Meta) mcp.Meta {
	modern := b.Modern()
	reserved := false
	for k := range meta {
		if strings.HasPrefix(k, reservedMetaPrefix) {
			reserved = true
			break
		}
	}
	if !reserved && !modern {
		return meta
	}
	out := make(mcp.Meta, len(meta)+4)
	for k, v := range meta {
		if !strings.HasPrefix(k, reservedMetaPrefix) {
			out[k] = v
		}
	}
	if !modern {
		return out
	}
	out[mcp.MetaKeyProtocolVersion] = b.InitializeResult().ProtocolVersion
	out[mcp.MetaKeyClientInfo] = m.clientInfo
	out[mcp.MetaKeyClientCapabilities] = agentCapsV2(s, meta)
	if level := s.requestLogLevel(meta); level != "" {
		out[mcp.MetaKeyLogLevel] = level
	}
	return out
}

// forwardBytes is forward for the requests whose results reach the agent
// as the backend sent them, from either door: tools/call, prompts/get,
// resources/read. rawMeta is the agent's _meta as sent, if it was not
// decoded into in.meta (then the backend gets it as sent: see
// passThrough.plainMeta), fields the rest of the backend's params.
func forwardBytes(ctx context.Context, m *Mux, mem *member, in inbound, rawMeta json.RawMessage, fields []param) (json.RawMessage, error) {
	for _, f := range fields {
		if f.key == "arguments" {
			in.args = f.value // for the audit log's names of them
		}
	}
	return forward(ctx, m, mem, in, func(ctx context.Context, b *backends.Backend, fwd mcp.Meta, rd *round) (json.RawMessage, error) {
		sendMeta := rawMeta
		if in.meta != nil || len(fwd) > 0 {
			sendMeta = nil
			if len(fwd) > 0 {
				sendMeta, _ = json.Marshal(fwd) // the backend's own: backendMeta, and mux's progress token
			}
		}
		params := fields
		if rd != nil { // a round of answers: the agent's own, or collected by mux (rounds.go)
			responses, err := json.Marshal(rd.responses)
			if err != nil {
				return nil, err
			}
			state, _ := json.Marshal(rd.state)
			params = append(append([]param{}, fields...), param{"inputResponses", responses}, param{"requestState", state})
		}
		return b.CallRaw(ctx, in.method, paramsObject(sendMeta, params))
	})
}

// finishResult is res, the backend's result for method as it sent it, as
// the agent of s gets it: a tool result's resource links are learned (reads
// of them route to mem), a read's invalid cache hints mended, mem's
// colliding ui:// URIs in their own form (uialias.go), and for an agent of
// the current era what the era requires added (era.go).
func (m *Mux) finishResult(s *session, mem *member, method string, res json.RawMessage) json.RawMessage {
	switch method {
	case "tools/call":
		mem.learnRaw(res)
	case "resources/read":
		res = validCacheHints(res)
	}
	res = m.cat.get().ui.withUIAliases(mem, res)
	if s != nil && s.isModern() {
		res = m.eraResult(res, method == "resources/read")
	}
	return res
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
	if s == nil || s.conn.Load() != nil || door.StreamOf(ctx) != nil {
		return // stdio, or the HTTP fast path: in order by themselves
	}
	s.mu.Lock()
	q := s.notes
	s.mu.Unlock()
	if q != nil {
		q.Flush(settleWait - time.Since(start))
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
// out, the go-sdk sends the backend notifications/cancelled. A parked
// call's context is its own already (park made it, and ends it when the
// request ends): its deadline cancels that one.
func (m *Mux) withDeadline(ctx context.Context, mem *member, pc *parkedCall) (context.Context, *deadline, context.CancelFunc) {
	var cancel context.CancelCauseFunc
	if pc != nil {
		cancel = pc.cancel
	} else {
		ctx, cancel = context.WithCancelCause(ctx)
	}
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
		if r, ok := door.CancelReason(extra); ok {
			return r
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
	var down *downError
	if errors.As(err, &down) { // it names the backend already
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: down.Error()}
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
