package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/catalogmem"
	"github.com/mcp-mux/mcp-mux/mux/door"
)

// Server-to-client requests: a backend's roots/list, sampling/createMessage
// and elicitation/create go to the agent session they belong to, and the
// answer goes back unchanged. Backends are told the agent's roots, sampling
// and elicitation capabilities, so that they offer through mux what they
// offer the agent directly.
//
// Backends start before the agent's initialize arrives, and a client's
// capabilities are fixed when it initializes. So each backend's process is
// started at once, and its initialize waits (at most agentWait after mux
// started) for the first agent session's initialize. A backend that had to
// be initialized without them (the agent was later than that) is restarted
// when they arrive, if they differ from what it was told.

// defaultAgentWait bounds how long a backend's initialize waits for the
// agent's: an agent that launched mux sends initialize within milliseconds.
const defaultAgentWait = 2 * time.Second

// codeCannotForward is the error a backend gets when no agent session can
// take its request. Not -32601: the go-sdk replaces the message of any
// -32601 with a bare "method not found", and the reason would be lost.
const codeCannotForward = jsonrpc.CodeInternalError

// maxElicitations bounds the URL-mode elicitations remembered for routing
// their notifications/elicitation/complete.
const maxElicitations = 1000

// agentState is what the backends are told of the agent.
type agentState struct {
	// wait is how long backends wait for the first agent session's
	// initialize: 0 means defaultAgentWait, < 0 that no agent will come
	// (check --connect declares no capabilities). Set before Start.
	wait  time.Duration
	once  sync.Once
	ready chan struct{} // closed when the first agent session initialized
	until time.Time     // backends wait for ready until then

	mu    sync.Mutex
	known bool
	caps  *mcp.ClientCapabilities             // the first agent session's roots, sampling, elicitation
	era   string                              // and its protocol version
	told  map[*member]*mcp.ClientCapabilities // what each member's current backend was told (nil: none)
	// pending are the members at rest with the catalog seen last, taken
	// before the agent's capabilities were known (lazycaps.go).
	pending []*member
	// elicitations maps a URL-mode elicitation's id to the session asked,
	// where its notifications/elicitation/complete goes.
	elicitations map[string]*session
}

func (a *agentState) init() {
	a.once.Do(func() {
		a.ready = make(chan struct{})
		w := a.wait
		if w == 0 {
			w = defaultAgentWait
		}
		a.until = time.Now().Add(max(w, 0))
	})
}

// withClientRequests adds to a backend's start options what makes it a
// client of the agent: the capabilities to declare and the request hooks.
func (mem *member) withClientRequests(opts backends.Options) backends.Options {
	opts.ClientCapabilities = mem.clientCapabilities
	opts.Hooks.Roots = mem.forwardRoots
	opts.Hooks.CreateMessage = mem.forwardCreateMessage
	opts.Hooks.Elicit = mem.forwardElicit
	opts.Hooks.ElicitationComplete = mem.forwardElicitationComplete
	opts.Hooks.Agents = func() (int, int) {
		return agentCount(mem.sessionsInFlight()), agentCount(mem.m.liveSessions())
	}
	return opts
}

// clientCapabilities is called by backends.Start once the process runs:
// it waits (bounded) for the agent's capabilities and records what the
// backend is told.
func (mem *member) clientCapabilities(ctx context.Context) *mcp.ClientCapabilities {
	a := &mem.m.agent
	a.init()
	if d := time.Until(a.until); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-a.ready:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.told == nil {
		a.told = map[*member]*mcp.ClientCapabilities{}
	}
	caps := a.caps
	if !a.known && a.wait >= 0 {
		// No agent yet (every backend of serve --http): the backend is
		// told all that mux can forward, so that no agent that comes
		// later needs it restarted; one that lacks a capability the
		// backend uses gets an error that says so (agentFor).
		caps = anyAgentCaps()
		mem.log.Debug("initializing the backend before the agent: declaring every capability mux forwards")
	}
	a.told[mem] = caps
	return caps
}

// anyAgentCaps is every client capability mux can forward to some agent:
// roots (with list changes), sampling (with context and tools) and
// elicitation (form and URL).
func anyAgentCaps() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{
		RootsV2:     &mcp.RootCapabilities{ListChanged: true},
		Sampling:    &mcp.SamplingCapabilities{Context: &mcp.SamplingContextCapabilities{}, Tools: &mcp.SamplingToolsCapabilities{}},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
	}
}

// agentInitialized takes the capabilities of the first agent session that
// initialized, and restarts the backends that were told others.
func (m *Mux) agentInitialized(p *mcp.InitializeParams) {
	if p == nil {
		return
	}
	a := &m.agent
	a.init()
	a.mu.Lock()
	if a.known {
		a.mu.Unlock()
		return
	}
	a.known = true
	// An agent of the current era cannot be sent requests, but mux asks
	// it in its requests' rounds (rounds.go): backends are told what it
	// can answer all the same.
	a.caps = forwardable(p.Capabilities)
	a.era = p.ProtocolVersion
	close(a.ready)
	pending := a.pending
	a.pending = nil
	var stale, early []*member
	for mem, told := range a.told {
		if !covers(told, a.caps) {
			stale = append(stale, mem)
		} else if capsKey(told) == capsKey(anyAgentCaps()) {
			early = append(early, mem)
		}
	}
	a.mu.Unlock()
	m.settleRest(pending, catalogmem.Shape(a.caps))
	if hasRoots(a.caps) {
		// A backend initialized before the agent may have asked for roots
		// when there was no one to ask: told that they changed, it asks
		// again, and the agent answers now.
		for _, mem := range early {
			m.notifyRootsChanged(mem)
		}
	}
	for _, mem := range stale {
		mem.log.Info("the agent's capabilities came after the backend was initialized without them: restarting it", "capabilities", capsKey(a.caps))
		select {
		case mem.reinit <- struct{}{}:
		default:
		}
	}
}

// stale reports whether mem's backend was told other capabilities than the
// agent's (a reinit signal may outlive the backend it was meant for).
func (a *agentState) stale(mem *member) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	told, ok := a.told[mem]
	return a.known && ok && !covers(told, a.caps)
}

// covers reports whether a backend told told may serve an agent that has
// caps without a restart: it was told everything the agent has (it may
// have been told more: a request for what the agent lacks gets an error).
// A backend told nothing (a check's) is told too little for any agent
// with something.
func covers(told, caps *mcp.ClientCapabilities) bool {
	var t, c any
	json.Unmarshal([]byte(capsKey(told)), &t)
	json.Unmarshal([]byte(capsKey(caps)), &c)
	return contains(t, c)
}

// contains reports whether the JSON value a has everything b has.
func contains(a, b any) bool {
	bm, ok := b.(map[string]any)
	if !ok {
		return reflect.DeepEqual(a, b)
	}
	am, ok := a.(map[string]any)
	if !ok {
		return len(bm) == 0
	}
	for k, bv := range bm {
		av, ok := am[k]
		if !ok || !contains(av, bv) {
			return false
		}
	}
	return true
}

// forwardable keeps of c what mux forwards: roots, sampling, elicitation,
// and the extensions the agent supports.
func forwardable(c *mcp.ClientCapabilities) *mcp.ClientCapabilities {
	out := &mcp.ClientCapabilities{}
	if c != nil {
		out.RootsV2, out.Sampling, out.Elicitation, out.Extensions = c.RootsV2, c.Sampling, c.Elicitation, c.Extensions
	}
	return out
}

// capsKey identifies what a backend is told (RootsV2 has no JSON of its own).
func capsKey(c *mcp.ClientCapabilities) string {
	c = forwardable(c)
	k, _ := json.Marshal(struct {
		Roots       *mcp.RootCapabilities        `json:"roots,omitempty"`
		Sampling    *mcp.SamplingCapabilities    `json:"sampling,omitempty"`
		Elicitation *mcp.ElicitationCapabilities `json:"elicitation,omitempty"`
		Extensions  map[string]any               `json:"extensions,omitempty"`
	}{c.RootsV2, c.Sampling, c.Elicitation, c.Extensions})
	return string(k)
}

// agentCapsV2 is what the agent of s can answer, as the current era writes
// client capabilities: roots, sampling, elicitation and extensions, from
// the request's _meta (meta, the current era) or the session's initialize.
// A backend of the current era is told them with every request.
func agentCapsV2(s *session, meta mcp.Meta) map[string]any {
	out := map[string]any{}
	if s == nil {
		return out
	}
	if s.isModern() {
		var caps map[string]any
		switch v := meta[mcp.MetaKeyClientCapabilities].(type) {
		case map[string]any:
			caps = v
		default:
			if data, err := json.Marshal(v); err == nil {
				_ = json.Unmarshal(data, &caps)
			}
		}
		for _, k := range []string{"roots", "sampling", "elicitation", "extensions"} {
			if v, ok := caps[k]; ok && v != nil {
				out[k] = v
			}
		}
		return out
	}
	p := s.initParams()
	if p == nil || p.Capabilities == nil {
		return out
	}
	c := p.Capabilities
	if c.RootsV2 != nil {
		out["roots"] = c.RootsV2
	}
	if c.Sampling != nil {
		out["sampling"] = c.Sampling
	}
	if c.Elicitation != nil {
		out["elicitation"] = c.Elicitation
	}
	if len(c.Extensions) > 0 {
		out["extensions"] = c.Extensions
	}
	return out
}

func hasRoots(c *mcp.ClientCapabilities) bool    { return c.RootsV2 != nil }
func hasSampling(c *mcp.ClientCapabilities) bool { return c.Sampling != nil }

func (mem *member) forwardRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	if p == nil {
		p = &mcp.ListRootsParams{}
	}
	if mem.m.rootsOutsideRequests(mem) {
		return mem.m.learnedRoots(ctx, mem) // roots.go
	}
	if ss := mem.m.rootsSessions(); len(ss) > 1 {
		return mem.commonRoots(ctx, ss, p) // roots.go
	}
	_, res, err := forwardToAgent[*mcp.ListRootsResult](ctx, mem, "roots/list", "roots", hasRoots, p)
	return res, err
}

func (mem *member) forwardCreateMessage(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	if p == nil {
		p = &mcp.CreateMessageWithToolsParams{}
	}
	_, res, err := forwardToAgent[*mcp.CreateMessageWithToolsResult](ctx, mem, "sampling/createMessage", "sampling", hasSampling, p)
	return res, err
}

func (mem *member) forwardElicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "elicitation/create: missing params"}
	}
	p = withMode(p)
	capName, has := elicitCapability(p)
	s, res, err := forwardToAgent[*mcp.ElicitResult](ctx, mem, "elicitation/create", capName, has, p)
	if err == nil && p.Mode == "url" && p.ElicitationID != "" {
		mem.m.rememberElicitation(p.ElicitationID, s)
	}
	return res, err
}

// withMode is p with its mode said: ElicitParams.Mode has no omitempty, so
// an absent mode would go out as "mode":"", which clients refuse.
func withMode(p *mcp.ElicitParams) *mcp.ElicitParams {
	mode := p.Mode
	if mode == "" && p.URL != "" {
		mode = "url"
	}
	if mode == "" {
		mode = "form" // what an absent mode means
	}
	if p.Mode == mode {
		return p
	}
	cp := *p
	cp.Mode = mode
	return &cp
}

// elicitCapability is the capability an elicitation of p's mode needs.
func elicitCapability(p *mcp.ElicitParams) (string, func(*mcp.ClientCapabilities) bool) {
	if p.Mode == "url" {
		return "elicitation (url mode)", func(c *mcp.ClientCapabilities) bool {
			return c.Elicitation != nil && c.Elicitation.URL != nil
		}
	}
	return "elicitation (form mode)", func(c *mcp.ClientCapabilities) bool {
		// An elicitation capability naming no mode means form (2025-06-18).
		return c.Elicitation != nil && (c.Elicitation.Form != nil || c.Elicitation.URL == nil)
	}
}

func (m *Mux) rememberElicitation(id string, s *session) {
	a := &m.agent
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.elicitations == nil {
		a.elicitations = map[string]*session{}
	}
	if len(a.elicitations) >= maxElicitations {
		for k := range a.elicitations { // a bound, not an LRU
			delete(a.elicitations, k)
			break
		}
	}
	a.elicitations[id] = s
}

// forwardElicitationComplete sends the agent session that was asked the
// URL-mode elicitation the backend's notifications/elicitation/complete.
// It runs in the backend's notification dispatch: it only enqueues.
func (mem *member) forwardElicitationComplete(p *mcp.ElicitationCompleteParams) {
	m := mem.m
	a := &m.agent
	a.mu.Lock()
	s := a.elicitations[p.ElicitationID]
	delete(a.elicitations, p.ElicitationID)
	a.mu.Unlock()
	if s == nil {
		var err error
		capName, has := elicitCapability(&mcp.ElicitParams{Mode: "url"})
		if s, _, err = m.agentFor(mem, "notifications/elicitation/complete", capName, has); err != nil {
			mem.log.Warn("notifications/elicitation/complete dropped", "elicitation_id", p.ElicitationID, "err", err)
			return
		}
	}
	m.deliver(s, "notifications/elicitation/complete", p)
}

// forwardToAgent sends the backend's request to the agent session it
// belongs to and returns the answer as the agent gave it. To an agent of
// the current era, which cannot be sent requests, it goes through the
// agent's request that it belongs to, parked for the purpose (rounds.go).
func forwardToAgent[R mcp.Result, P mcp.Params](ctx context.Context, mem *member, method, capName string, has func(*mcp.ClientCapabilities) bool, p P) (*session, R, error) {
	var zero R
	s, pc, err := mem.m.agentFor(mem, method, capName, has)
	if err != nil {
		mem.log.Warn("the backend's request cannot go to the agent", "method", method, "err", err)
		return nil, zero, err
	}
	if pc != nil {
		mem.log.Debug("asking the agent in its request's next round", "method", method, "session", s.id)
		ir, ok := any(p).(mcp.InputRequest)
		if !ok {
			return s, zero, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: %s cannot be asked in a round", method)}
		}
		res, err := pc.ask(ctx, ir)
		if err != nil {
			return s, zero, agentError(method, s, err)
		}
		if roots, ok := res.(*mcp.ListRootsResult); ok {
			mem.m.learnRoots(roots) // the agent's roots, for when it is not asked (roots.go)
		}
		r, ok := res.(R)
		if !ok {
			return s, zero, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("mcp-mux: the agent answered %s with a %T", method, res)}
		}
		return s, r, nil
	}
	res, err := sendToAgent[R](ctx, mem, s, method, p)
	return s, res, err
}

// sendToAgent sends agent session s (of the handshake era) a request of the
// backend's and returns its answer. Meanwhile the request_timeout of that
// session's requests to the backend is paused: the agent may be waiting on
// a human.
func sendToAgent[R mcp.Result, P mcp.Params](ctx context.Context, mem *member, s *session, method string, p P) (R, error) {
	var zero R
	m := mem.m
	mem.log.Debug("forwarding the backend's request to the agent", "method", method, "session", s.id)
	resume := mem.pauseDeadlines(s)
	defer resume()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(m.ctx, cancel)()
	var res mcp.Result
	var err error
	rc := mem.requestContext(s)
	if hs := door.StreamOf(rc); hs != nil {
		// The request it serves took the HTTP fast path: on its stream.
		res, err = door.Ask[R](ctx, hs, method, p)
	} else {
		if rc != nil {
			ctx = valuesOf{ctx, rc} // over HTTP: on the stream of the request it serves
		}
		res, err = m.send(ctx, method, &mcp.ServerRequest[P]{Session: s.ss, Params: p})
	}
	if err != nil {
		return zero, agentError(method, s, err)
	}
	r, ok := res.(R)
	if !ok {
		return zero, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: %s: unexpected result %T", method, res)}
	}
	return r, nil
}

// agentError is what the backend gets when the agent did not answer its
// request: the agent's own JSON-RPC error as it said it (a wrapped one
// would lose its data), or one of mux's saying why.
func agentError(method string, s *session, err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return &jsonrpc.Error{Code: je.Code, Message: je.Message, Data: je.Data}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: %s to agent session %s: %v", method, s.id, err)}
}

// askSession asks handshake-era agent session s one request of a
// current-era backend's input_required (rounds.go), as the backend would
// have sent it.
func (mem *member) askSession(ctx context.Context, s *session, req mcp.InputRequest) (mcp.InputResponse, error) {
	check := func(capName string, has func(*mcp.ClientCapabilities) bool) error {
		return canTake(s, capName, has)
	}
	switch p := req.(type) {
	case *mcp.ElicitParams:
		capName, has := elicitCapability(p)
		if err := check(capName, has); err != nil {
			return nil, err
		}
		return sendToAgent[*mcp.ElicitResult](ctx, mem, s, "elicitation/create", withMode(p))
	case *mcp.CreateMessageWithToolsParams:
		if err := check("sampling", hasSampling); err != nil {
			return nil, err
		}
		return sendToAgent[*mcp.CreateMessageWithToolsResult](ctx, mem, s, "sampling/createMessage", p)
	case *mcp.CreateMessageParams:
		if err := check("sampling", hasSampling); err != nil {
			return nil, err
		}
		return sendToAgent[*mcp.CreateMessageWithToolsResult](ctx, mem, s, "sampling/createMessage", p)
	case *mcp.ListRootsParams:
		if err := check("roots", hasRoots); err != nil {
			return nil, err
		}
		return sendToAgent[*mcp.ListRootsResult](ctx, mem, s, "roots/list", p)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: the backend asked for input of an unknown kind (%T)", req)}
}

// modernWith reports whether the agent speaks the current era and declared
// what has looks for.
func (a *agentState) modernWith(has func(*mcp.ClientCapabilities) bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.known && a.era >= modernEra && has(a.caps)
}

// declared reports whether the agent of s declared what has looks for.
func (s *session) declared(has func(*mcp.ClientCapabilities) bool) bool {
	p := s.initParams()
	return p != nil && p.Capabilities != nil && has(p.Capabilities)
}

// rootsListChanged passes the agent's notifications/roots/list_changed to
// every backend that was told roots.listChanged. It runs in the session's
// dispatch: the sends run apart.
func (m *Mux) rootsListChanged(context.Context, *mcp.RootsListChangedRequest) {
	for _, mem := range m.members() {
		m.notifyRootsChanged(mem)
	}
}

// notifyRootsChanged sends mem's backend notifications/roots/list_changed,
// if it was told roots.listChanged, apart.
func (m *Mux) notifyRootsChanged(mem *member) {
	mem.mu.Lock()
	b := mem.b
	mem.mu.Unlock()
	if b == nil {
		return // a backend that starts later asks for the roots anew
	}
	if c := b.ClientCapabilities(); c == nil || c.RootsV2 == nil || !c.RootsV2.ListChanged {
		return
	}
	m.goOwned(func() {
		ctx, cancel := context.WithTimeout(m.ctx, notifyTimeout)
		defer cancel()
		if err := b.NotifyRootsListChanged(ctx); err != nil {
			mem.log.Debug("roots/list_changed not delivered", "err", err)
		}
	})
}
