package door

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// What a request of the current era (2026-07-28) says of its agent. It has
// no session: each request carries in its _meta what an initialize would
// have said, and the go-sdk's stateless handler makes a session of its own
// for each one (connects it, decodes the body several times, runs the
// typed round trip, closes it): 0.45 of a direct server's calls per
// second, where a handshake-era session on the fast path does 0.9. The
// core serves a tools/call or resources/read of the current era on the
// fast path instead (HTTPCore.Stateless), with a session of its own that
// lives as long as the request, its params from the _meta, as the go-sdk
// takes them (AgentMetas).
//
// Whatever the go-sdk would judge takes its path: a request whose
// Mcp-Method or Mcp-Name header is missing or does not match the body, a
// _meta that does not decode as the go-sdk's would, or any other method.

// AgentMetas are the _meta of current-era requests without a session,
// decoded: a client sends the same _meta (its version, capabilities and
// name) with every request, and decoding it took a stateless request
// three passes over it (the agent's params, the era's checks, the _meta
// for the backend), a third of the fast path's allocations.
type AgentMetas struct {
	mu   sync.Mutex
	seen map[string]*AgentMeta // by the _meta as sent
}

// AgentMeta is one _meta of AgentMetas: Raw as sent, the agent's Params
// it says, and itself decoded as the core's pass-through decodes one.
// Shared by every request that sent it: never changed.
type AgentMeta struct {
	Raw    json.RawMessage
	Params *mcp.InitializeParams
	Meta   mcp.Meta
}

// maxAgentMetas bounds AgentMetas: past it, they are forgotten and decoded
// again (agents send a few distinct ones, not this many).
const maxAgentMetas = 64

// Of is the decoded _meta of params, a request's of version, or nil if
// they are not of that version or do not decode (see statelessParams).
func (am *AgentMetas) Of(params json.RawMessage, version string) *AgentMeta {
	raw, ok := wire.ObjectMember(params, "_meta")
	if !ok {
		return nil
	}
	am.mu.Lock()
	known := am.seen[string(raw)]
	am.mu.Unlock()
	if known != nil {
		if known.Params.ProtocolVersion != version {
			return nil // the header's version is not the _meta's
		}
		return known
	}
	p := statelessParams(raw, version)
	if p == nil {
		return nil
	}
	known = &AgentMeta{Raw: raw, Params: p}
	if json.Unmarshal(raw, &known.Meta) != nil {
		return nil
	}
	if _, ok := known.Meta["progressToken"]; ok {
		return known // one request's own: not worth keeping
	}
	known.Raw = bytes.Clone(raw)
	am.mu.Lock()
	if len(am.seen) >= maxAgentMetas || am.seen == nil {
		am.seen = map[string]*AgentMeta{}
	}
	am.seen[string(known.Raw)] = known
	am.mu.Unlock()
	return known
}

// statelessParams are what a current-era request's _meta says of its
// agent in their _meta, decoded as the go-sdk does (validateRequestMeta),
// or nil if they are not of that version or do not decode.
func statelessParams(raw json.RawMessage, version string) *mcp.InitializeParams {
	meta, ok := wire.ObjectMembers(raw)
	if !ok {
		return nil
	}
	var v string
	if json.Unmarshal(meta[mcp.MetaKeyProtocolVersion], &v) != nil || v != version || v < CurrentEra {
		return nil
	}
	var caps *struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"` // the current era's shape
	}
	if json.Unmarshal(meta[mcp.MetaKeyClientCapabilities], &caps) != nil || caps == nil {
		return nil
	}
	c := caps.ClientCapabilities
	c.RootsV2 = caps.Roots
	if c.RootsV2 != nil {
		c.Roots = *c.RootsV2
	}
	p := &mcp.InitializeParams{ProtocolVersion: v, Capabilities: &c}
	if info, present := meta[mcp.MetaKeyClientInfo]; present {
		if json.Unmarshal(info, &p.ClientInfo) != nil || p.ClientInfo == nil {
			return nil
		}
	}
	return p
}
