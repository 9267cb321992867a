package mux

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/subs"
)

// CodeLimitExceeded is the JSON-RPC error code of a resources/subscribe
// over the session's max_subscriptions.
const CodeLimitExceeded = -32029

// subscribe handles resources/subscribe. The go-sdk calls it and, when it
// returns nil, records the session in its own table too (unused by mux,
// which targets sessions itself).
func (m *Mux) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	if uri == "" {
		return errMissingURI
	}
	if len(uri) > maxURILength {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("uri of %d bytes is longer than mcp-mux accepts (%d)", len(uri), maxURILength)}
	}
	sid := m.sessionID(req.Session)
	if isBuiltin(uri) {
		_, err := m.subs.Subscribe(sid, builtinBackend, uri, subs.LocalOnly, nil)
		return m.subscribeResult(sid, uri, err)
	}
	m.waitStarted(ctx)
	mem, backendURI, ok := m.route(m.viewOf(m.session(req.Session)), uri)
	if !ok {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("resource %q is not available from any backend", uri)}
	}
	b, err := mem.backendForUse(ctx) // started if it was not running (lazy.go)
	if err != nil {
		return toAgentError(mem, err)
	}
	mode := subs.LocalOnly
	if b.SupportsSubscribe() {
		mode = subs.Forwarded
	}
	added, err := m.subs.Subscribe(sid, mem.spec.Name, uri, mode, func() error {
		// Shared by every session that subscribes the URI: no agent's _meta.
		in := inbound{ss: req.Session, extra: req.Extra, method: "resources/subscribe", target: uri}
		_, err := forward(ctx, m, mem, in, func(ctx context.Context, b *backends.Backend, meta mcp.Meta, _ *round) (struct{}, error) {
			return struct{}{}, b.Subscribe(ctx, &mcp.SubscribeParams{Meta: meta, URI: backendURI})
		})
		return err // reaches the agent as the backend said it
	})
	if err == nil && added && mode == subs.LocalOnly {
		mem.pollBaseline(ctx, uri)
	}
	return m.subscribeResult(sid, uri, err)
}

func (m *Mux) subscribeResult(sid, uri string, err error) error {
	var le *subs.LimitError
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &le):
		return &jsonrpc.Error{Code: CodeLimitExceeded, Message: fmt.Sprintf("subscription limit reached: at most %d subscriptions per session (max_subscriptions)", le.Limit)}
	case errors.As(err, &je):
		return je
	case err != nil:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	m.log.Debug("subscribed", "session", sid, "uri", uri)
	m.builtinChanged(uriSubscriptions)
	return nil
}

// unsubscribe handles resources/unsubscribe: the backend hears of it only
// when no session holds the URI any more, and never for local-only ones.
// Unsubscribing what is not held succeeds and changes nothing.
func (m *Mux) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	// The go-sdk also calls this when a subscriptions/listen stream ends,
	// with that request's context, cancelled by then: the backend must be
	// told all the same (unforward bounds it).
	ctx = context.WithoutCancel(ctx)
	sid := m.sessionID(req.Session)
	removed, err := m.subs.Unsubscribe(sid, req.Params.URI, func(backend string) error {
		return m.unforward(ctx, backend, req.Params.URI)
	})
	if removed {
		m.builtinChanged(uriSubscriptions)
	}
	if err != nil {
		// The record is gone either way; the agent asked for it to be.
		m.log.Warn("backend refused unsubscribe", "uri", req.Params.URI, "err", err)
	}
	return nil
}

// unforward sends resources/unsubscribe to backend, if it is up.
func (m *Mux) unforward(ctx context.Context, backend, uri string) error {
	mem, ok := m.memberNamed(backend)
	if !ok {
		return nil
	}
	b, err := mem.backend()
	if err != nil {
		return nil // down: it holds nothing any more
	}
	if t, ok := m.cat.get().ui.target[uri]; ok && t.mem == mem {
		uri = t.uri // the backend's own (uialias.go)
	}
	ctx, cancel := context.WithTimeout(ctx, m.requestTimeout(mem))
	defer cancel()
	return b.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
}

// cleanupTimeout bounds all the unsubscribes of one ended session: a hung
// backend must not hold up shutdown.
const cleanupTimeout = 500 * time.Millisecond

// endSessionSubscriptions drops everything a finished session held; the
// go-sdk does not call the unsubscribe handler on disconnect.
func (m *Mux) endSessionSubscriptions(sid string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	removed, err := m.subs.EndSession(sid, func(backend, uri string) error {
		return m.unforward(ctx, backend, uri)
	})
	if err != nil {
		m.log.Warn("unsubscribe at session end failed", "session", sid, "err", err)
	}
	if len(removed) > 0 {
		m.log.Info("session ended: subscriptions removed", "session", sid, "count", len(removed))
		m.builtinChanged(uriSubscriptions)
	}
}

// resourceUpdated delivers a backend's notifications/resources/updated to
// every session subscribed to that URI (or to one it is a sub-resource of)
// on that backend, params unchanged. It runs inside the backend's
// notification dispatch: the lookup is cheap, the sending is queued.
func (m *Mux) resourceUpdated(mem *member, p *mcp.ResourceUpdatedNotificationParams) {
	if own := m.cat.get().ui.alias(mem, p.URI); own != p.URI {
		cp := *p
		cp.URI = own // subscribed in the agent's form (uialias.go)
		p = &cp
	}
	m.deliverUpdated(mem.spec.Name, p)
}

func (m *Mux) deliverUpdated(backend string, p *mcp.ResourceUpdatedNotificationParams) {
	if len(p.URI) > maxURILength {
		// No subscription can be for it, and matching it against
		// subscribed parents would cost time in proportion to its length.
		m.log.Warn("resources/updated with an overlong uri, dropped", "backend", backend, "bytes", len(p.URI), "limit", maxURILength)
		return
	}
	sids := m.subs.Subscribers(backend, p.URI)
	if len(sids) == 0 {
		m.log.Debug("resources/updated with no subscriber, dropped", "backend", backend, "uri", p.URI)
		return
	}
	for _, sid := range sids {
		s := m.sessionRecord(sid)
		if s == nil || backend != builtinBackend && hiddenFromView(m.viewOf(s), backend) {
			continue // ended, or a reload took the backend out of its view
		}
		m.notifyUpdated(s, p)
	}
}
