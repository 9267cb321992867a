package mux

import (
	"context"
	"encoding/json"
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

// rootsSettle is how long the request that learned the roots waits before
// it goes on to the backend whose roots/list they answered: a server acts
// on roots after it has the answer (server-filesystem checks each
// directory before it allows it), and the request may need them.
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
