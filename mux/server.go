package mux

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/door"
)

// Every request's route starts in this file.
//
// An agent's message comes in by one of three doors:
//
//   - stdio (mux/door): the connection reads each line once. A
//     request that can go as bytes (take, below: tools/call,
//     resources/read and resources/list of an initialized session, with
//     nothing unusual about them) is forwarded by the pass-through
//     (passthrough.go) and never reaches the go-sdk; the rest goes on to
//     the go-sdk's server.
//   - HTTP (mux/door, after the origin and token checks): a tools/call or
//     resources/read POSTed in a session of the handshake era or by an
//     agent of the current era, which has none, goes as bytes through
//     serveFast (http.go), with the pass-through's checks; the rest goes
//     to the go-sdk's handler and server, a call's event stream through
//     the door's filter, which leaves out the response to a call the
//     agent cancelled.
//   - the go-sdk's server decodes the request into its types and runs the
//     receiving middleware, outermost first (registered in routes):
//     initialize (adds the backends' instructions to initialize and
//     server/discover results), agentContext (puts mux's record of the
//     session in the context, learns the agent's capabilities, gives
//     current-era results what the era requires: era.go) and receive (the
//     method switch). What receive does not answer falls through to the
//     go-sdk: initialize, ping, logging/setLevel, resources/subscribe and
//     unsubscribe (which reach subscriptions.go through the go-sdk's
//     handlers), subscriptions/listen (listen.go).
//
// A request that a backend answers then goes: route.go or
// subscriptions.go (find the owner), forward.go (deadline, tracking,
// cancellation, progress, errors, settling), the backend (backends/). What
// mux sends the agent on its own initiative is in notify.go, logging.go,
// clientreq.go (the backends' requests to the agent) and listen.go.

// routes installs mux's middleware on the go-sdk server.
func (m *Mux) routes() {
	// AddSendingMiddleware calls the middleware at once: that is how we get
	// hold of the chain to send session-targeted notifications with.
	m.server.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		m.send = next
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				m.acknowledged(ctx, req)
			}
			return next(ctx, method, req)
		}
	})
	// Each added middleware wraps the ones before it: the last is outermost.
	m.server.AddReceivingMiddleware(m.receive)
	m.server.AddReceivingMiddleware(m.agentContext)
	m.server.AddReceivingMiddleware(m.initialize)
}

// receive is the go-sdk door's switch, the innermost middleware: every
// request the agent sends that concerns the merged catalog is answered here, not by the go-sdk's own
// feature sets (mirroring backends into those panics on real backends' data
// and refuses URIs a backend serves without listing them).
func (m *Mux) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			s := m.session(ss)
			s.lastActive.Store(time.Now().UnixNano())
			if x := req.GetExtra(); x != nil && x.Header != nil {
				s.askToolList(x.Header.Get(door.ToolListHeader))
				s.askProfile(x.Header.Get(door.ProfileHeader))   // checked by the HTTP door (profile.go)
				s.http.BindToken(x.Header.Get(door.TokenHeader)) // set by the HTTP door (door/tokens.go)
			}
		}
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			return m.listTools(ctx, r.Params)
		case *mcp.ListPromptsRequest:
			return m.listPrompts(ctx, r.Params)
		case *mcp.ListResourcesRequest: // also as bytes: take
			return m.listResources(ctx, r)
		case *mcp.ListResourceTemplatesRequest:
			return m.listTemplates(ctx, r.Params)
		case *mcp.CallToolRequest: // also as bytes: take
			return m.callTool(ctx, r)
		case *mcp.GetPromptRequest:
			return m.getPrompt(ctx, r)
		case *mcp.ReadResourceRequest: // also as bytes: take
			return m.readResource(ctx, r)
		case *mcp.CompleteRequest:
			return m.complete(ctx, r)
		case *mcp.SubscriptionsListenRequest:
			return m.listen(ctx, method, req, next)
		case *mcp.ServerRequest[*mcp.SetLoggingLevelParams]:
			m.setLevel(ctx, r) // and the go-sdk records it (next)
		}
		// initialize, ping, logging/setLevel, and resources/subscribe and
		// unsubscribe (which reach m.subscribe / m.unsubscribe through the
		// SDK, so that it keeps its own bookkeeping consistent).
		return next(ctx, method, req)
	}
}

// take is the stdio door's switch: it forwards req as bytes if it can
// (passthrough.go), and reports false, having done nothing, for a request
// the go-sdk's path must handle. Only the session's reader calls it.
func (p *passThrough) take(req *jsonrpc.Request, call *door.Call) bool {
	if !p.m.first.over.Load() || p.s.ss.InitializeParams() == nil {
		return false
	}
	switch req.Method {
	case "tools/call":
		return p.callTool(req, call)
	case "resources/read":
		return p.readResource(req, call)
	case "resources/list":
		return p.listResources(req, call)
	}
	return false
}

// agentContext is the middleware around receive: it puts the agent's
// session into the context of everything below, learns the agent's
// capabilities from the first initialize, and gives current-era results
// what the era requires (era.go).
func (m *Mux) agentContext(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok {
			return next(ctx, method, req)
		}
		s := m.sessionIn(ctx, ss)
		if s.isModern() {
			// The current era has no initialize: the go-sdk took the
			// session's parameters from this request's _meta already, and
			// the request may need the backends.
			m.agentInitialized(ss.InitializeParams()) // once: the first session's
		}
		res, err := next(context.WithValue(ctx, sessionKey{}, s), method, req)
		if err == nil && res != nil && s.isModern() {
			res = eraTyped(res)
		}
		if err == nil && (method == "initialize" || s.isModern()) {
			// The go-sdk decodes initialize's params into a type of its
			// own, and takes server/discover's while answering it: what
			// they say is known once it has handled them.
			m.agentInitialized(ss.InitializeParams())
		}
		return res, err
	}
}

// initialize is the outermost receiving middleware: once the go-sdk and
// the middleware below it answered initialize or server/discover (which
// lets the backends initialize), it adds the instructions
// (instructions.go).
func (m *Mux) initialize(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		var came time.Time
		if method == "initialize" || method == "server/discover" {
			came = time.Now()
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		var instructions *string
		switch r := res.(type) {
		case *mcp.InitializeResult:
			instructions = &r.Instructions
		case *mcp.DiscoverResult: // the current era's initialize
			instructions = &r.Instructions
		default:
			return res, err
		}
		// The session's agent and profile (profile.go): the agent's name
		// is in initialize's params, and in server/discover's _meta, which
		// the go-sdk made the session's parameters of.
		var s *session
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			s = m.session(ss)
		}
		a := traitsOf(s)
		by := m.firstListBy(a, came)
		if s != nil && !by.IsZero() {
			s.listBy.Store(by.UnixNano())
		}
		*instructions = m.waitInstructions(ctx, m.viewOf(s), a, by)
		if _, ok := res.(*mcp.InitializeResult); ok && s != nil {
			s.announced.Store(true)
			m.logSession(s, "started")
		}
		return res, err
	}
}
