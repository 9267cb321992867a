package mux

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// agentFor picks the agent session a request of mem's backend (method)
// goes to. A handshake-era backend's request says nothing of the call it
// serves (neither stdio nor the go-sdk's HTTP client tells on which call's
// stream it came), so sampling and elicitation go to the one agent with
// requests in flight to that backend, or with none, to the only agent; if
// more than one could be meant, asking one would put one user's question
// to another: the backend is refused (unclearAgent). Sessions sharing a
// Mux work in one project, so roots/list goes to the most recently active.
// A request in flight from an agent of the current era is parked
// (rounds.go), and the backend's request goes through it: pc. A session
// that cannot take it makes a JSON-RPC error for the backend that says why.
func (m *Mux) agentFor(mem *member, method, capName string, has func(*mcp.ClientCapabilities) bool) (*session, *parkedCall, error) {
	if method != "roots/list" {
		if err := m.unclearAgent(mem, capName); err != nil {
			return nil, nil, err
		}
	}
	if c := mem.parkedCallFor(capName, has); c != nil {
		return c.s, c.pc, nil
	}
	cands := mem.sessionsInFlight()
	if len(cands) == 0 {
		cands = m.liveSessions()
	}
	if len(cands) == 0 {
		return nil, nil, m.agent.sessionless(capName, has)
	}
	// Of one agent's sessions (or, for roots, of the project's), the
	// most recently active that can take it.
	var best, refused *session
	var why error
	for _, s := range cands {
		if err := canTake(s, capName, has); err != nil {
			if refused == nil || s.lastActive.Load() > refused.lastActive.Load() {
				refused, why = s, err
			}
			continue
		}
		if best == nil || s.lastActive.Load() > best.lastActive.Load() {
			best = s
		}
	}
	if best == nil {
		if len(cands) > 1 {
			why = &jsonrpc.Error{Code: codeCannotForward, Message: fmt.Sprintf("mcp-mux: none of the %d agent sessions that could have sent this (backend %q) can take a %s request; last: %v", len(cands), mem.spec.Name, capName, why)}
		}
		return nil, nil, why
	}
	return best, nil, nil
}

// unclearAgent is the error for a backend's request that more than one
// agent could be meant by: several have requests in flight to the backend,
// or none has and several are connected. Nil when one agent, or none, is.
func (m *Mux) unclearAgent(mem *member, capName string) error {
	name := mem.spec.Name
	fix := fmt.Sprintf("share = \"never\" for %q gives each session its own instance", name)
	if n := agentCount(mem.sessionsInFlight()); n > 1 {
		return &jsonrpc.Error{Code: codeCannotForward, Message: fmt.Sprintf("mcp-mux: %d agent sessions have requests in flight to backend %q, so mcp-mux cannot tell which of them to ask for this %s request; %s", n, name, capName, fix)}
	} else if n == 1 {
		return nil
	}
	if n := agentCount(m.liveSessions()); n > 1 {
		return &jsonrpc.Error{Code: codeCannotForward, Message: fmt.Sprintf("mcp-mux: no request of an agent is in flight to backend %q and %d agent sessions are connected, so mcp-mux cannot tell which of them to ask for this %s request; %s", name, n, capName, fix)}
	}
	return nil
}

// agentCount is how many agents the sessions ss stand for: each session is an
// agent, except that the requests of the current era over HTTP, each a
// session of its own, say nothing of which agent sent them and count as
// one (their parked requests decide: parkedCallFor).
func agentCount(ss []*session) int {
	n, anonymous := 0, false
	for _, s := range ss {
		if s.conn.Load() == nil && s.isModern() {
			anonymous = true
			continue
		}
		n++
	}
	if anonymous {
		n++
	}
	return n
}

// sessionless is the error for a backend's request that no agent session
// is there to take. An agent of the current era over HTTP has no session
// between its requests, so no session does not mean no agent: what the
// agent declared, and its era, say why it cannot be asked.
func (a *agentState) sessionless(capName string, has func(*mcp.ClientCapabilities) bool) error {
	a.mu.Lock()
	known, caps, era := a.known, a.caps, a.era
	a.mu.Unlock()
	msg := fmt.Sprintf("mcp-mux: no agent session is connected to take the %s request", capName)
	switch {
	case known && !has(caps):
		msg = fmt.Sprintf("mcp-mux: the agent did not declare the %s capability", capName)
	case known && era >= modernEra:
		msg = fmt.Sprintf("mcp-mux: the agent speaks protocol %s, in which a server can ask the client for a %s only while it serves the client's tools/call, prompts/get or resources/read, and none is in flight", era, capName)
	}
	return &jsonrpc.Error{Code: codeCannotForward, Message: msg}
}

// canTake says why session s cannot take a request needing capName.
func canTake(s *session, capName string, has func(*mcp.ClientCapabilities) bool) error {
	p := s.initParams()
	switch {
	case p == nil:
		return &jsonrpc.Error{Code: codeCannotForward, Message: fmt.Sprintf("mcp-mux: agent session %s has not initialized, so it cannot take a %s request", s.id, capName)}
	case p.Capabilities == nil || !has(p.Capabilities):
		return &jsonrpc.Error{Code: codeCannotForward, Message: fmt.Sprintf("mcp-mux: agent session %s did not declare the %s capability", s.id, capName)}
	case p.ProtocolVersion >= modernEra:
		return &jsonrpc.Error{Code: codeCannotForward, Message: fmt.Sprintf("mcp-mux: agent session %s speaks protocol %s, in which a server can ask the client for a %s only while it serves the client's tools/call, prompts/get or resources/read", s.id, p.ProtocolVersion, capName)}
	}
	return nil
}
