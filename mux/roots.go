package mux

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The roots of an agent of the current era. A server of the handshake era
// asks its client for roots whenever it likes: server-filesystem started
// without directories asks as soon as it is initialized, outside any
// request, and again at every notifications/roots/list_changed. In the
// current era roots travel only in a request's input round, so mux keeps
// the roots such an agent last gave (in any round: rounds.go), and answers
// a backend's roots/list that no request of the agent is in flight for
// from them. Until it has them:
//
//   - the backend's roots/list waits (up to rootsWait), and the agent's
//     next tools/call, prompts/get or resources/read to that backend starts
//     with an input round of mux's own that asks the agent for its roots
//     (forward.go), before the request goes on to the backend;
//   - a backend whose roots/list gave up waiting first is sent
//     notifications/roots/list_changed once mux has them, so it asks again.
//
// Roots that change in a later round (the agent's roots changed) are
// announced the same way, to every backend told roots.listChanged.

// rootsWait bounds how long a backend's roots/list waits for mux to learn
// the agent's roots: the go-sdk's and the TypeScript SDK's clients wait 60
// s for an answer by default, and a backend that gave up is told later.
const rootsWait = 30 * time.Second

// agentRoots is what mux knows of the roots of the agent of the current era.
type agentRoots struct {
	wait time.Duration // how long a backend's roots/list waits; 0: rootsWait (tests shorten it)

	mu      sync.Mutex
	roots   *mcp.ListRootsResult // nil until an agent said them
	learned chan struct{}        // closed when roots is set (then made anew)
	// wanted: backends that asked while roots was unknown, and whether
	// they gave up waiting (and so must be told roots/list_changed).
	wanted map[*member]bool
}

// known is the roots last learned, if any.
func (r *agentRoots) known() *mcp.ListRootsResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.roots
}

// wantedBy reports whether mem asked for roots mux does not know yet.
func (r *agentRoots) wantedBy(mem *member) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.wanted[mem]
	return ok && r.roots == nil
}

// gaveUp reports whether mem's roots/list gave up waiting for roots mux
// does not know yet.
func (r *agentRoots) gaveUp(mem *member) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wanted[mem]
}

// rootsOutsideRequests reports whether a backend's roots/list with no
// request of an agent in flight is for an agent of the current era: no
// session of the handshake era could take it, and one of the current era
// declared roots (with no session at all: the agent did).
func (m *Mux) rootsOutsideRequests(mem *member) bool {
	if len(mem.sessionsInFlight()) > 0 {
		return false
	}
	live := m.liveSessions()
	if len(live) == 0 {
		// Between its requests an agent of the current era over HTTP
		// has no session: what it said of itself still holds.
		return m.agent.modernWith(hasRoots)
	}
	modern := false
	for _, s := range live {
		if !s.declared(hasRoots) {
			continue
		}
		if !s.isModern() {
			return false
		}
		modern = true
	}
	return modern
}

// learnedRoots answers mem's roots/list outside any request from the
// roots the agent last gave, waiting (bounded) until mux learns them.
func (m *Mux) learnedRoots(ctx context.Context, mem *member) (*mcp.ListRootsResult, error) {
	r := &m.roots
	r.mu.Lock()
	if r.roots != nil {
		res := r.roots
		r.mu.Unlock()
		return res, nil
	}
	if r.wanted == nil {
		r.wanted = map[*member]bool{}
	}
	if r.learned == nil {
		r.learned = make(chan struct{})
	}
	r.wanted[mem] = false
	learned := r.learned
	r.mu.Unlock()
	mem.log.Info("the backend asks for the agent's roots, which an agent of the current era gives only in a request: asking it with its next request to this backend")
	wait := r.wait
	if wait <= 0 {
		wait = rootsWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-learned:
		return r.known(), nil
	case <-t.C:
	case <-ctx.Done():
	case <-m.ctx.Done():
	}
	r.mu.Lock()
	if _, ok := r.wanted[mem]; ok {
		r.wanted[mem] = true // told with roots/list_changed once known
	}
	r.mu.Unlock()
	return nil, &jsonrpc.Error{Code: codeCannotForward, Message: "mcp-mux: the agent speaks the current era, which gives roots only with a request; mcp-mux asks for them with the agent's next request to this server and then sends notifications/roots/list_changed"}
}

// learnRoots records the roots an agent of the current era gave. Backends
// that gave up waiting for them, or (when they changed) every backend told
// roots.listChanged, get notifications/roots/list_changed.
func (m *Mux) learnRoots(res *mcp.ListRootsResult) {
	if res == nil {
		return
	}
	r := &m.roots
	r.mu.Lock()
	changed := r.roots != nil && !sameRoots(r.roots, res)
	r.roots = res
	var tell []*member
	for mem, gaveUp := range r.wanted {
		if gaveUp {
			tell = append(tell, mem)
		}
	}
	r.wanted = nil
	if r.learned != nil {
		close(r.learned)
		r.learned = nil
	}
	r.mu.Unlock()
	if changed {
		m.rootsListChanged(context.Background(), nil)
		return
	}
	for _, mem := range tell {
		m.notifyRootsChanged(mem)
	}
}

func sameRoots(a, b *mcp.ListRootsResult) bool {
	ja, _ := json.Marshal(a.Roots)
	jb, _ := json.Marshal(b.Roots)
	return string(ja) == string(jb)
}

// rootsSettle is how long a request waits, after a backend's roots/list
// was answered (by the roots that request learned, or as the backend
// started: forward), before it goes on to that backend: a server acts on
// roots after it has the answer (server-filesystem checks each directory
// before it allows it), and the request may need them.
const rootsSettle = 200 * time.Millisecond

// askRoots is the input round of mux's own that asks the agent of a parked
// request for its roots (see forward), before the request goes on.
func (m *Mux) askRoots(ctx context.Context, pc *parkedCall) {
	res, err := pc.ask(ctx, &mcp.ListRootsParams{})
	if err != nil {
		return // the request goes on; the backend's roots/list is answered later
	}
	if roots, ok := res.(*mcp.ListRootsResult); ok {
		m.learnRoots(roots)
		t := time.NewTimer(rootsSettle)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// Sessions that share a backend (the shared mcp-mux's sessions of one
// project, or serve --http's) share its roots: a server such as
// server-filesystem allows what its client's roots say, for every session
// it serves. So a backend that asks while several agents of the handshake
// era that declared roots are connected gets the roots all of them give,
// never one agent's alone; an agent that cannot be asked counts as giving
// none. When a session comes or goes, the backends are told
// notifications/roots/list_changed, so that they ask again.

// commonRootsWait bounds each agent's answer to a shared roots/list.
const commonRootsWait = 10 * time.Second

// rootsSessions are the sessions a shared roots/list asks: of the
// handshake era, initialized, with roots declared.
func (m *Mux) rootsSessions() []*session {
	var out []*session
	for _, s := range m.liveSessions() {
		if s.declared(hasRoots) && !s.isModern() {
			out = append(out, s)
		}
	}
	return out
}

// commonRoots asks every session of ss for its roots and answers with the
// roots all of them gave.
func (mem *member) commonRoots(ctx context.Context, ss []*session, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	ctx, cancel := context.WithTimeout(ctx, commonRootsWait)
	defer cancel()
	results := make([]*mcp.ListRootsResult, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() {
			if res, err := sendToAgent[*mcp.ListRootsResult](ctx, mem, s, "roots/list", p); err == nil {
				results[i] = res
			} else {
				mem.log.Warn("an agent sharing this backend did not give its roots: the backend gets none of the others'", "session", s.id, "err", err)
			}
		})
	}
	wg.Wait()
	common := &mcp.ListRootsResult{Roots: []*mcp.Root{}}
	if results[0] != nil {
		for _, r := range results[0].Roots {
			if r != nil && everyHas(results[1:], r.URI) {
				common.Roots = append(common.Roots, r)
			}
		}
	}
	if len(common.Roots) < rootCount(results) {
		mem.log.Warn("the agents sharing this backend give other roots: it gets only those all of them give (share = \"never\" gives each its own)", "sessions", len(ss), "roots", len(common.Roots))
	}
	return common, nil
}

func everyHas(results []*mcp.ListRootsResult, uri string) bool {
	for _, res := range results {
		if res == nil || !slices.ContainsFunc(res.Roots, func(r *mcp.Root) bool { return r != nil && r.URI == uri }) {
			return false
		}
	}
	return true
}

// rootCount is the most roots any one agent gave.
func rootCount(results []*mcp.ListRootsResult) int {
	n := 0
	for _, res := range results {
		if res != nil {
			n = max(n, len(res.Roots))
		}
	}
	return n
}

// rootsSessionsChanged tells the backends to ask for roots again when a
// session that gives them came (joined) or went while another is
// connected: what they all give changed.
func (m *Mux) rootsSessionsChanged(s *session, joined bool) {
	others := len(m.rootsSessions())
	if joined {
		others--
	}
	if !s.declared(hasRoots) || s.isModern() || others < 1 {
		return
	}
	m.goOwned(func() { m.rootsListChanged(m.ctx, nil) })
}

// initialized is the go-sdk's notifications/initialized of a session.
func (m *Mux) initialized(_ context.Context, r *mcp.InitializedRequest) {
	m.rootsSessionsChanged(m.session(r.Session), true)
}
