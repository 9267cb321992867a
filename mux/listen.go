package mux

import (
	"context"
	"maps"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/door"
)

// The current protocol era (2026-07-28) has no initialize and no standing
// session subscriptions: a client opens subscriptions/listen streams, each
// asking for list changes and resource updates, and every notification on
// a stream carries its id in _meta (io.modelcontextprotocol/subscriptionId).
// The go-sdk serves subscriptions/listen itself: it subscribes each URI
// through mux's subscribe handler (so routing, refcounting, local-only and
// limits are the same as for resources/subscribe), acknowledges, and
// unsubscribes when the stream ends. What it cannot do is tag the
// notifications mux sends a session itself, so mux learns each stream from
// its acknowledgement and tags what it sends modern sessions, sending them
// only what a stream asked for.

// modernEra is the first protocol revision of the current era.
const modernEra = door.CurrentEra

// isModern reports whether s speaks the current era.
func (s *session) isModern() bool {
	p := s.initParams()
	return p != nil && p.ProtocolVersion >= modernEra
}

// listenStream is one subscriptions/listen stream of a session, as its
// acknowledgement described it.
type listenStream struct {
	id                        any // the listen request's id: the subscriptionId
	tools, prompts, resources bool
	uris                      map[string]bool
}

// listenKey carries the listenStream being set up in the listen request's
// context, where the go-sdk sends the acknowledgement from.
type listenKey struct{}

// listen wraps the go-sdk's handling of one subscriptions/listen: the
// stream is the session's from its acknowledgement until the request ends.
func (m *Mux) listen(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok {
		return next(ctx, method, req)
	}
	s := m.session(ss)
	stream := &listenStream{}
	res, err := next(context.WithValue(ctx, listenKey{}, stream), method, req)
	s.mu.Lock()
	delete(s.streams, stream)
	s.mu.Unlock()
	return res, err
}

// acknowledged records a stream from the acknowledgement the go-sdk sends
// on it (seen by mux's sending middleware).
func (m *Mux) acknowledged(ctx context.Context, req mcp.Request) {
	stream, _ := ctx.Value(listenKey{}).(*listenStream)
	// The go-sdk sends it as a *ServerRequest[Params], not of its own type.
	p, _ := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams)
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if stream == nil || p == nil || ss == nil {
		return
	}
	stream.id = p.Meta[mcp.MetaKeySubscriptionID]
	stream.tools = p.Notifications.ToolsListChanged
	stream.prompts = p.Notifications.PromptsListChanged
	stream.resources = p.Notifications.ResourcesListChanged
	stream.uris = map[string]bool{}
	for _, u := range p.Notifications.ResourceSubscriptions {
		stream.uris[u] = true
	}
	s := m.session(ss)
	s.mu.Lock()
	if s.streams == nil {
		s.streams = map[*listenStream]bool{}
	}
	s.streams[stream] = true
	s.mu.Unlock()
}

// streamFor returns the id of the stream of s that subscribed uri or a
// resource uri is under (as the registry matches sub-resources).
func (s *session) streamFor(uri string) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		if st.uris[uri] {
			return st.id, true
		}
	}
	for st := range s.streams {
		for u := range st.uris {
			if strings.HasPrefix(uri, u) && (strings.HasSuffix(u, "/") || strings.HasPrefix(uri[len(u):], "/")) {
				return st.id, true
			}
		}
	}
	return nil, false
}

// streamForList returns the id of a stream of s that asked for k's
// list_changed.
func (s *session) streamForList(k kinds) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		if (k == kindTools && st.tools) || (k == kindPrompts && st.prompts) || (k == kindResources && st.resources) {
			return st.id, true
		}
	}
	return nil, false
}

// tagged returns a copy of meta with the stream id added.
func tagged(meta mcp.Meta, id any) mcp.Meta {
	out := maps.Clone(meta)
	if out == nil {
		out = mcp.Meta{}
	}
	out[mcp.MetaKeySubscriptionID] = id
	return out
}

// notifyUpdated sends s that uri changed: to a session of the handshake era
// as it is, to one of the current era tagged with the stream that asked
// for it (and not at all if none did).
func (m *Mux) notifyUpdated(s *session, p *mcp.ResourceUpdatedNotificationParams) {
	if s.isModern() {
		id, ok := s.streamFor(p.URI)
		if !ok {
			return
		}
		cp := *p
		cp.Meta = tagged(p.Meta, id)
		p = &cp
	}
	m.deliver(s, "notifications/resources/updated", p)
}

// listChangedParams returns what list_changed of kind k to send s, or nil
// if s is not to get it (a modern session that did not ask).
func listChangedParams[P interface {
	*mcp.ToolListChangedParams | *mcp.PromptListChangedParams | *mcp.ResourceListChangedParams
	mcp.Params
}](s *session, k kinds, p P) P {
	if !s.isModern() {
		return p
	}
	id, ok := s.streamForList(k)
	if !ok {
		return nil
	}
	p.SetMeta(tagged(p.GetMeta(), id))
	return p
}

// resourceNotFoundFor is the error for a URI nobody serves, in the era of
// the session that asked: -32002 in the handshake era, -32602 in the
// current one (as each revision says).
func resourceNotFoundFor(ss *mcp.ServerSession, uri string) error {
	err := resourceNotFound(uri).(*jsonrpc.Error)
	if p := ss.InitializeParams(); p != nil && p.ProtocolVersion >= modernEra {
		err.Code = jsonrpc.CodeInvalidParams
	}
	return err
}
