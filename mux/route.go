package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
)

// CodeResourceNotFound is MCP's error code for a read of an unknown
// resource (2025-11-25). The go-sdk still uses -32602 by default.
const CodeResourceNotFound = -32002

// callTool routes by exposed name; the backend is called with the tool's
// original name and the agent's arguments and _meta, whose progress token
// is replaced by one of mux's own (see awaitProgress).
func (m *Mux) callTool(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	m.waitStarted(ctx)
	p := r.Params
	if a := bytes.TrimSpace(p.Arguments); len(a) > 0 && a[0] != '{' && string(a) != "null" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call: arguments must be an object"}
	}
	e, ok := m.cat.get().tools.lookup(p.Name)
	if !ok {
		return nil, m.unknownName("tool", p.Name)
	}
	b, err := e.mem.backend()
	if err != nil {
		return nil, toAgentError(e.mem, err)
	}
	ctx, d, cancel := m.withDeadline(ctx, e.mem)
	defer cancel()
	defer e.mem.track(ctx, d)()
	ctx = m.withCancelReason(ctx, e.mem, r.Extra)
	meta, done := e.mem.awaitProgress(ctx, p.Meta, r.Session, d)
	defer done()
	res, err := b.Session().CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: e.original, Arguments: p.Arguments})
	if err != nil {
		return nil, m.backendError(ctx, e.mem, b, err)
	}
	m.settle(ctx, b)
	e.mem.learn(res)
	return res, nil
}

func (m *Mux) getPrompt(ctx context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	m.waitStarted(ctx)
	p := r.Params
	e, ok := m.cat.get().prompts.lookup(p.Name)
	if !ok {
		return nil, m.unknownName("prompt", p.Name)
	}
	b, err := e.mem.backend()
	if err != nil {
		return nil, toAgentError(e.mem, err)
	}
	ctx, d, cancel := m.withDeadline(ctx, e.mem)
	defer cancel()
	defer e.mem.track(ctx, d)()
	ctx = m.withCancelReason(ctx, e.mem, r.Extra)
	fwd := *p
	fwd.Name = e.original
	var done func()
	fwd.Meta, done = e.mem.awaitProgress(ctx, p.Meta, r.Session, d)
	defer done()
	res, err := b.Session().GetPrompt(ctx, &fwd)
	if err != nil {
		return nil, m.backendError(ctx, e.mem, b, err)
	}
	m.settle(ctx, b)
	return res, nil
}

// unknownName is the error for a tool or prompt name the merged catalog
// lacks: if a backend that is down offered it, the error names that
// backend and its state (the agent should retry later), else -32602.
func (m *Mux) unknownName(kind, name string) error {
	for _, mem := range m.members() {
		if mem.serving() || !m.offersVisible(mem, kind, name) {
			continue
		}
		if _, err := mem.backend(); err != nil {
			return toAgentError(mem, err)
		}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown %s %q", kind, name)}
}

// owner finds the backend that serves uri: the first in config order that
// lists it exactly, matches it with a template, or returned it in a tool
// result. Config order decides between every kind of match, so a later
// backend cannot take an earlier one's URI by listing it. URIs are never
// rewritten; mux's own scheme is never routed to a backend.
func (m *Mux) owner(uri string) (*member, bool) {
	if hasBuiltinScheme(uri) {
		return nil, false
	}
	for _, mem := range m.members() {
		if mem.claims(uri) {
			return mem, true
		}
	}
	return nil, false
}

// maxURILength bounds the URIs mux matches against subscriptions and
// routes: far above any real URI, far below what could cost time.
const maxURILength = 64 << 10

var errMissingURI = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing uri"}

func resourceNotFound(uri string) error {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return &jsonrpc.Error{Code: CodeResourceNotFound, Message: "Resource not found", Data: data}
}

func (m *Mux) readResource(ctx context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	p := r.Params
	if p.URI == "" {
		return nil, errMissingURI
	}
	if res, ok := m.readBuiltin(m.sessionID(r.Session), p.URI); ok {
		return res, nil
	}
	m.waitStarted(ctx)
	mem, ok := m.owner(p.URI)
	if !ok {
		return nil, resourceNotFoundFor(r.Session, p.URI)
	}
	b, err := mem.backend()
	if err != nil {
		return nil, toAgentError(mem, err)
	}
	ctx, d, cancel := m.withDeadline(ctx, mem)
	defer cancel()
	defer mem.track(ctx, d)()
	ctx = m.withCancelReason(ctx, mem, r.Extra)
	fwd := *p
	var done func()
	fwd.Meta, done = mem.awaitProgress(ctx, p.Meta, r.Session, d)
	defer done()
	res, err := b.Session().ReadResource(ctx, &fwd)
	if err != nil {
		return nil, m.backendError(ctx, mem, b, err)
	}
	m.settle(ctx, b)
	// The typed result always has the cache hints: a backend that sent
	// none would otherwise be passed on with the invalid scope "".
	res.Cacheable = normalCache(res.Cacheable)
	return res, nil
}

// complete routes completion/complete by its reference: a prompt by its
// exposed name (renamed back), a resource template by the backend that has
// it (or that owns the URI).
func (m *Mux) complete(ctx context.Context, r *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	m.waitStarted(ctx)
	p := r.Params
	if p.Ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete: missing ref"}
	}
	fwd := *p
	ref := *p.Ref
	fwd.Ref = &ref
	var mem *member
	switch ref.Type {
	case "ref/prompt":
		e, ok := m.cat.get().prompts.lookup(ref.Name)
		if !ok {
			return nil, m.unknownName("prompt", ref.Name)
		}
		mem, ref.Name = e.mem, e.original
	case "ref/resource":
		for _, e := range m.cat.get().templates {
			if e.item.URITemplate == ref.URI {
				mem = e.mem
				break
			}
		}
		if mem == nil {
			var ok bool
			if mem, ok = m.owner(ref.URI); !ok {
				return nil, resourceNotFoundFor(r.Session, ref.URI)
			}
		}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown completion ref type %q", ref.Type)}
	}
	b, err := mem.backend()
	if err != nil {
		return nil, toAgentError(mem, err)
	}
	ctx, d, cancel := m.withDeadline(ctx, mem)
	defer cancel()
	defer mem.track(ctx, d)()
	ctx = m.withCancelReason(ctx, mem, r.Extra)
	var done func()
	fwd.Meta, done = mem.awaitProgress(ctx, p.Meta, r.Session, d)
	defer done()
	res, err := b.Session().Complete(ctx, &fwd)
	if err != nil {
		return nil, m.backendError(ctx, mem, b, err)
	}
	m.settle(ctx, b)
	return res, nil
}

// settleWait bounds how long a response waits for the backend's
// notifications sent before it to reach the agent first (see Settle).
const settleWait = 100 * time.Millisecond

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
