package mux

import (
	"encoding/json"
	"fmt"
	"net/http"
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
	params := statelessParams(req.Params, version)
	if params == nil {
		return false
	}
	s := &session{id: fmt.Sprintf("h%d", statelessSeq.Add(1)), params: params}
	s.fast.idle = time.Now()
	pr, took := (&passThrough{m: m, s: s}).fastCall(req)
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

// statelessParams are what a current-era request's params say of its
// agent in their _meta, decoded as the go-sdk does (validateRequestMeta),
// or nil if they are not of that version or do not decode.
func statelessParams(raw json.RawMessage, version string) *mcp.InitializeParams {
	keys, ok := wire.ObjectMembers(raw)
	if !ok {
		return nil
	}
	meta, ok := wire.ObjectMembers(keys["_meta"])
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
