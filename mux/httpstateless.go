package mux

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// The current era's fast path over HTTP. An agent of the current era
// (2026-07-28) has no session: each request carries in its _meta what an
// initialize would have said, and the go-sdk's stateless handler makes a
// session of its own for each one (connects it, decodes the body several
// times, runs the typed round trip, closes it): 0.45 of a direct server's
// calls per second, where a handshake-era session on the fast path
// (httpfast.go) does 0.9. A tools/call or resources/read of the current
// era goes to its backend as bytes instead, with a session of mux's own
// that lives as long as the request (its params from the _meta, as the
// go-sdk takes them), through the same serveFast: the same forward, the
// same progress and logs on the request's stream, the same rounds of input
// (a handshake-era backend's requests become input_required, rounds.go).
//
// Whatever the go-sdk would judge takes its path: a request whose
// Mcp-Method or Mcp-Name header is missing or does not match the body, a
// _meta that does not decode as the go-sdk's would, or any other method.

// statelessSeq numbers the sessions of stateless requests, for the logs.
var statelessSeq atomic.Int64

// statelessPOST serves r, a POST of the current era without a session, if
// the fast path takes it, and reports whether it did. If it did not, r's
// body is as it was.
func (m *Mux) statelessPOST(w http.ResponseWriter, r *http.Request, maxBody int64) bool {
	version := r.Header.Get("MCP-Protocol-Version")
	method := r.Header.Get("Mcp-Method")
	if !m.first.over.Load() || r.Method != http.MethodPost || !hostAllowed(r) || !fastHeaders(r) ||
		(method != "tools/call" && method != "resources/read") || r.Header.Get("Mcp-Name") == "" {
		return false
	}
	msg, restore, ok := fastBody(w, r, maxBody)
	if !ok {
		return true // answered
	}
	took := false
	defer func() {
		if !took {
			restore()
		}
	}()
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() || req.Method != method {
		return false
	}
	known := m.agentMetas.of(req.Params, version)
	if known == nil {
		return false
	}
	s := &session{id: "h" + strconv.FormatInt(statelessSeq.Add(1), 10), params: known.params}
	s.askProfile(r.Header.Get(ProfileHeader)) // checked by the handler (profile.go)
	s.fast.idle = time.Now()
	pr, took := (&passThrough{m: m, s: s, known: known}).fastCall(req)
	if !took || pr.target != r.Header.Get("Mcp-Name") {
		took = false
		return false
	}
	m.mu.Lock()
	if m.stateless == nil {
		m.stateless = map[*session]struct{}{}
	}
	m.stateless[s] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.stateless, s)
		m.mu.Unlock()
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
		s.endFast()
	}()
	m.serveFast(w, r, s, req, pr)
	return true
}

// agentMetas are the _meta of current-era requests without a session,
// decoded: a client sends the same _meta (its version, capabilities and
// name) with every request, and decoding it took a stateless request
// three passes over it (the agent's params, the era's checks, the _meta
// for the backend), a third of the fast path's allocations.
type agentMetas struct {
	mu   sync.Mutex
	seen map[string]*agentMeta // by the _meta as sent
}

// agentMeta is one _meta of agentMetas: raw as sent, the agent's params
// it says, and itself decoded as the pass-through decodes one (plainMeta).
// Shared by every request that sent it: never changed.
type agentMeta struct {
	raw    json.RawMessage
	params *mcp.InitializeParams
	meta   mcp.Meta
}

// maxAgentMetas bounds agentMetas: past it, they are forgotten and decoded
// again (agents send a few distinct ones, not this many).
const maxAgentMetas = 64

// of is the decoded _meta of params, a request's of version, or nil if
// they are not of that version or do not decode (see statelessParams).
func (am *agentMetas) of(params json.RawMessage, version string) *agentMeta {
	raw, ok := wire.ObjectMember(params, "_meta")
	if !ok {
		return nil
	}
	am.mu.Lock()
	known := am.seen[string(raw)]
	am.mu.Unlock()
	if known != nil {
		if known.params.ProtocolVersion != version {
			return nil // the header's version is not the _meta's
		}
		return known
	}
	p := statelessParams(raw, version)
	if p == nil {
		return nil
	}
	known = &agentMeta{raw: raw, params: p}
	if json.Unmarshal(raw, &known.meta) != nil {
		return nil
	}
	if _, ok := known.meta["progressToken"]; ok {
		return known // one request's own: not worth keeping
	}
	known.raw = bytes.Clone(raw)
	am.mu.Lock()
	if len(am.seen) >= maxAgentMetas || am.seen == nil {
		am.seen = map[string]*agentMeta{}
	}
	am.seen[string(known.raw)] = known
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
	if json.Unmarshal(meta[mcp.MetaKeyProtocolVersion], &v) != nil || v != version || v < modernEra {
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
