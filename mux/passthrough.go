package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/backends/wire"
	"github.com/mcp-mux/mcp-mux/mux/door"
)

// Pass-through: tools/call and resources/read from a stdio agent to a stdio
// backend, nearly all of an agent's traffic, go as bytes. The agent's line
// is decoded once (its envelope, and of its params only the name or uri to
// route by and the _meta mux rewrites), the backend gets the params with
// the tool's own name, and its result goes upstream as the backend wrote
// it. The go-sdk's typed round trip on both sides (decode the params into
// types, encode them for the backend, decode the result into types, encode
// it for the agent) and its two goroutine hops were most of what a request
// cost in mcp-mux.
//
// Only the way a request travels changes: it finds its owner with the
// functions callTool and readResource use (route.go) and goes through the
// same forward (forward.go): bounded by request_timeout, tracked for the
// backend's requests to the agent, given a progress token of mux's,
// cancelled with the agent's reason, settled. Anything those would answer
// with an error of mux's own (an unknown name, a backend that is down, a
// malformed request, mcp-mux's own resources) and anything unusual (a
// session that is not initialized, a request of another era than its
// session's, keys the types know and this does not) takes the go-sdk's
// path instead, so every error and edge stays what it was. Sessions of
// both eras pass through: era.go has what differs.

// passThrough forwards one stdio session's requests as bytes. Only the
// session's reader calls it.
type passThrough struct {
	m *Mux
	s *session
	c *door.Conn
	// era is the current-era _meta last found sound (era.go).
	era eraMeta
	// known is the _meta of a stateless request over HTTP, decoded and
	// found sound already (http.go), or nil.
	known *door.AgentMeta
	// held is what sendNow held back for idle: only the reader touches it.
	held []held
}

// plainParams splits params into the keys named in want (and _meta), or
// reports false if there is any other key, a key twice, or params is not
// an object.
func plainParams(params json.RawMessage, want ...string) (splitParams, bool) {
	var buf [4]wire.Member
	members, ok := wire.AppendMembers(buf[:0], params)
	if !ok || len(members) > len(splitParams{}.m) {
		return splitParams{}, false
	}
	for _, m := range members {
		if string(m.Key) != "_meta" && string(m.Key) != want[0] && (len(want) < 2 || string(m.Key) != want[1]) {
			return splitParams{}, false
		}
	}
	var sp splitParams
	sp.n = copy(sp.m[:], members)
	if m := sp.get("_meta"); m != nil && !isObject(m) {
		return splitParams{}, false
	}
	return sp, true
}

// splitParams are params as plainParams splits them: _meta and at most
// two keys more, without a map for every request.
type splitParams struct {
	n int
	m [3]wire.Member
}

// get is key's value, or nil.
func (sp *splitParams) get(key string) json.RawMessage { return wire.Lookup(sp.m[:sp.n], key) }

// jsonString decodes raw, a JSON string of a message that decoded (so
// valid JSON). A tool's name nearly always has nothing to unescape: it is
// then the bytes between the quotes, with no trip through encoding/json.
func jsonString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		inner := raw[1 : n-1]
		if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			return string(inner), true
		}
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err == nil
}

// quoteJSON is s as json.Marshal encodes it: quoted as it is when it has
// nothing to escape (no quote, backslash, control character, HTML
// character or non-ASCII byte), else by json.Marshal.
func quoteJSON(s string) json.RawMessage {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			out, _ := json.Marshal(s)
			return out
		}
	}
	out := make([]byte, 0, len(s)+2)
	return append(append(append(out, '"'), s...), '"')
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// plainMeta decodes the agent's _meta when what the backend gets is not
// the agent's as sent: it has a progress token (which mux replaces), or
// either side speaks the current era (whose protocol keys are each
// session's own: backendMeta), which modern says of the backend; ok is
// false for a _meta the go-sdk's path must see: a request of another era
// than its session's, or current-era keys the go-sdk would refuse.
func (p *passThrough) plainMeta(raw json.RawMessage, modernBackend bool) (meta mcp.Meta, ok bool) {
	modern := p.s.isModern()
	if raw == nil {
		return nil, !modern
	}
	if k := p.known; k != nil && modern && bytes.Equal(raw, k.Raw) {
		return k.Meta, true
	}
	keys, ok := wire.ObjectMembers(raw)
	if !ok {
		return nil, false
	}
	if _, tagged := keys[mcp.MetaKeyProtocolVersion]; tagged != modern {
		return nil, false
	}
	if modern && !p.era.sound(keys, p.s.initParams().ProtocolVersion) {
		return nil, false
	}
	if _, ok := keys["progressToken"]; !ok && !modern && !modernBackend && p.m.tracer == nil {
		return nil, true // tracing replaces the traceparent (traces.go)
	}
	if json.Unmarshal(raw, &meta) != nil {
		return nil, false
	}
	return meta, true
}

// passable is a request the pass-through can forward as bytes: its owner,
// what it names (its tool or URI), the agent's _meta as sent and decoded
// (nil if plainMeta left it as sent: then the backend gets it as sent),
// and the rest of the backend's params.
type passable struct {
	mem     *member
	b       *backends.Backend // mem's, when the request was taken
	target  string
	rawMeta json.RawMessage
	meta    mcp.Meta
	fields  []param
}

func (p *passThrough) callTool(req *jsonrpc.Request, call *door.Call) bool {
	pr, ok := p.toolCall(req)
	if ok {
		p.send(req, call, pr)
	}
	return ok
}

func (p *passThrough) readResource(req *jsonrpc.Request, call *door.Call) bool {
	pr, ok := p.resourceRead(req)
	if ok {
		p.send(req, call, pr)
	}
	return ok
}

// fastCall is req, a tools/call or resources/read, as an HTTP fast path
// forwards it, or false if it is one for the go-sdk's path.
func (p *passThrough) fastCall(req *jsonrpc.Request) (passable, bool) {
	switch req.Method {
	case "tools/call":
		return p.toolCall(req)
	case "resources/read":
		return p.resourceRead(req)
	}
	return passable{}, false
}

// toolCall is the tools/call req as the pass-through forwards it, or false
// if it is one for the go-sdk's path.
func (p *passThrough) toolCall(req *jsonrpc.Request) (passable, bool) {
	keys, ok := plainParams(req.Params, "name", "arguments")
	if !ok {
		return passable{}, false
	}
	name, ok := jsonString(keys.get("name"))
	if !ok {
		return passable{}, false
	}
	args := bytes.TrimSpace(keys.get("arguments"))
	if !argumentsObject(args) {
		return passable{}, false
	}
	if ownTool(name) {
		return passable{}, false // mux's own (toolsearch.go): the go-sdk's path
	}
	e, err := p.m.tool(p.m.viewOf(p.s), name)
	if err != nil || taskRequired(e.raw) {
		return passable{}, false // the go-sdk's path gives the error
	}
	b, err := e.mem.backend()
	if err != nil {
		return passable{}, false
	}
	meta, ok := p.plainMeta(keys.get("_meta"), b.Modern())
	if !ok {
		return passable{}, false
	}
	return passable{e.mem, b, e.item.Name, keys.get("_meta"), meta, []param{{"name", quoteJSON(e.original)}, {"arguments", args}}}, true
}

// resourceRead is the resources/read req as the pass-through forwards it,
// or false if it is one for the go-sdk's path.
func (p *passThrough) resourceRead(req *jsonrpc.Request) (passable, bool) {
	keys, ok := plainParams(req.Params, "uri")
	if !ok {
		return passable{}, false
	}
	var uri string
	if json.Unmarshal(keys.get("uri"), &uri) != nil || uri == "" || hasBuiltinScheme(uri) {
		return passable{}, false
	}
	mem, backendURI, ok := p.m.route(p.m.viewOf(p.s), uri)
	if !ok {
		return passable{}, false
	}
	rawURI := keys.get("uri")
	if backendURI != uri {
		rawURI, _ = json.Marshal(backendURI)
	}
	b, err := mem.backend()
	if err != nil {
		return passable{}, false
	}
	meta, ok := p.plainMeta(keys.get("_meta"), b.Modern())
	if !ok {
		return passable{}, false
	}
	return passable{mem, b, uri, keys.get("_meta"), meta, []param{{"uri", rawURI}}}, true
}

// listResources answers resources/list with the page mux makes of the
// backends' pages as they sent them (listresources.go). Params with
// anything but a cursor, and sessions of the current era, take the
// go-sdk's path.
func (p *passThrough) listResources(req *jsonrpc.Request, call *door.Call) bool {
	if p.s.isModern() {
		return false
	}
	cur := ""
	if len(req.Params) > 0 {
		keys, ok := plainParams(req.Params, "cursor")
		if !ok || keys.get("_meta") != nil {
			return false
		}
		if v := keys.get("cursor"); v != nil && json.Unmarshal(v, &cur) != nil {
			return false
		}
	}
	ctx, cancel := p.begin(call)
	p.m.goOwned(func() {
		defer cancel()
		res, err := p.m.resourcesPage(ctx, p.s, cur)
		p.respond(req.ID, res, err)
	})
	return true
}

// param is one key of the params sent to a backend, its value as JSON.
type param struct {
	key   string
	value json.RawMessage
}

// paramsObject is the params object of meta (if any) and fields (those with
// a value), in that order.
func paramsObject(meta json.RawMessage, fields []param) json.RawMessage {
	n := len(meta) + 16
	for _, f := range fields {
		n += len(f.key) + len(f.value) + 4
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	if meta != nil {
		out = append(out, `"_meta":`...)
		out = append(out, meta...)
	}
	for _, f := range fields {
		if len(f.value) == 0 {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, f.key)
		out = append(out, ':')
		out = append(out, f.value...)
	}
	return append(out, '}')
}

// send runs req (as pr) at its backend in a goroutine of its own, as the
// go-sdk runs a handler, through the same forward as the go-sdk's path
// (forwardBytes), and answers it with the backend's result as sent; or,
// when it can, sends it from the reader itself (sendNow).
func (p *passThrough) send(req *jsonrpc.Request, call *door.Call, pr passable) {
	if p.sendNow(req, call, pr) {
		return
	}
	m, s := p.m, p.s
	ctx, cancel := p.begin(call)
	m.goOwned(func() {
		defer cancel()
		in := inbound{ss: s.ss, extra: call.Extra(), meta: pr.meta, method: req.Method, target: pr.target}
		res, err := forwardBytes(ctx, m, pr.mem, in, pr.rawMeta, pr.fields)
		if err != nil {
			p.respond(req.ID, nil, err)
			return
		}
		if req.Method == "tools/call" {
			m.calledTool(s, pr.target)
		}
		p.respond(req.ID, m.finishResult(s, pr.mem, req.Method, res), nil)
	})
}

// begin starts the handling of a request the pass-through took: its
// context ends when the agent cancels it or the connection closes.
func (p *passThrough) begin(call *door.Call) (context.Context, context.CancelFunc) {
	p.s.lastActive.Store(time.Now().UnixNano())
	ctx, cancel := p.c.Begin(call)
	return context.WithValue(ctx, sessionKey{}, p.s), cancel
}

// respond answers the agent's request id with res (JSON) or err.
func (p *passThrough) respond(id jsonrpc.ID, res json.RawMessage, err error) {
	if err != nil {
		p.c.RespondError(id, err)
		return
	}
	p.c.RespondRaw(id, res)
}
