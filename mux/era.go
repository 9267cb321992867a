package mux

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// A request of the current era (2026-07-28) carries in its _meta what an
// initialize would have said: the protocol version, the client's
// capabilities and, optionally, its name. The go-sdk checks those on every
// request and refuses one it cannot decode; it then names the server in
// the result's _meta. The pass-through does the same for the requests it
// takes, and forwards the agent's _meta to the backend unchanged, as the
// go-sdk's path does. Results of the era must also carry what a backend of
// the handshake era does not send (resultType; in reads, cache hints):
// eraResult adds it to results that pass through, eraTyped to those of the
// go-sdk's path.

// eraMeta is the current-era keys of the last _meta a session's reader
// found sound. A client sends the same ones with every request, so a
// request costs a comparison, not a decode.
type eraMeta struct {
	version, caps, info []byte
}

// sound reports whether keys, the members of a request's _meta, are of
// the session's version with capabilities and a client name the go-sdk
// would accept. Its decoding is at least as strict as the go-sdk's (only
// case folding of keys differs, and a key it folds must decode too): what
// fails here takes the go-sdk's path and gets its answer.
func (e *eraMeta) sound(keys map[string]json.RawMessage, version string) bool {
	v, caps, info := keys[mcp.MetaKeyProtocolVersion], keys[mcp.MetaKeyClientCapabilities], keys[mcp.MetaKeyClientInfo]
	if e.version != nil && bytes.Equal(v, e.version) && bytes.Equal(caps, e.caps) && bytes.Equal(info, e.info) {
		return true
	}
	var got string
	if json.Unmarshal(v, &got) != nil || got != version {
		return false // another version than the session's: the go-sdk judges it
	}
	var c *struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"` // the current era's shape
	}
	if caps == nil || json.Unmarshal(caps, &c) != nil || c == nil {
		return false
	}
	if _, present := keys[mcp.MetaKeyClientInfo]; present {
		var i *mcp.Implementation
		if json.Unmarshal(info, &i) != nil || i == nil {
			return false
		}
	}
	e.version, e.caps, e.info = bytes.Clone(v), bytes.Clone(caps), bytes.Clone(info)
	return true
}

// eraResult is res, a backend's tool, prompt or read result, as the
// current era wants it: with resultType ("complete" where a backend of the
// handshake era sent none; the era requires it), for a read (cacheable)
// with the cache hints the era requires (where absent, what mux reads
// their absence as: ttl 0, scope "public"; see cache.go), and with mux
// named as the server in its _meta (mcp.MetaKeyServerInfo), in place of
// any name the backend put there: server/discover names mux, and so does
// every result a direct server sends. The rest of res stays as sent.
func (m *Mux) eraResult(res json.RawMessage, cacheable bool) json.RawMessage {
	var buf [8]wire.Member // a result's members, without a map for every result
	top, ok := wire.AppendMembers(buf[:0], res)
	meta := wire.Lookup(top, "_meta")
	if !ok || (meta != nil && !isObject(meta)) {
		return m.eraResultDecoded(res, cacheable)
	}
	var name json.RawMessage
	if meta != nil {
		if name, ok = wire.ObjectMember(meta, mcp.MetaKeyServerInfo); !ok {
			return m.eraResultDecoded(res, cacheable)
		}
	}
	// What goes first in the result, and where mux's name goes.
	var first []byte
	switch {
	case name != nil: // the backend's name: mux's in its place
		res = splice(res, name, m.serverInfo)
	case meta != nil: // mux's name first among the backend's _meta
		res = insertMember(res, meta, m.serverInfoMember)
	default:
		first = append(append(append(first, `"_meta":{`...), m.serverInfoMember...), '}')
	}
	for _, d := range eraDefaults(cacheable) {
		if wire.Lookup(top, d.key) == nil {
			if len(first) > 0 {
				first = append(first, ',')
			}
			first = append(append(append(append(first, '"'), d.key...), `":`...), d.value...)
		}
	}
	if first != nil {
		res = insertMember(res, res, first)
	}
	return res
}

// eraDefaults is what a result of the current era must have, and what mux
// gives one whose backend sent none.
func eraDefaults(cacheable bool) []param {
	if cacheable {
		return readDefaults
	}
	return resultDefaults
}

var (
	resultDefaults = []param{{"resultType", json.RawMessage(`"complete"`)}}
	readDefaults   = append(slices.Clip(resultDefaults), param{"ttlMs", json.RawMessage(`0`)}, param{"cacheScope", json.RawMessage(`"public"`)})
)

// eraResultDecoded is eraResult for a result the byte scan cannot edit in
// place (escaped or repeated keys, a _meta that is not an object): decoded
// at the top level, and encoded again.
func (m *Mux) eraResultDecoded(res json.RawMessage, cacheable bool) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(res, &top) != nil || top == nil {
		return res
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(top["_meta"], &meta)
	meta = maps.Clone(meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[mcp.MetaKeyServerInfo] = m.serverInfo
	top["_meta"], _ = json.Marshal(meta)
	for _, d := range eraDefaults(cacheable) {
		if _, ok := top[d.key]; !ok {
			top[d.key] = d.value
		}
	}
	out, err := json.Marshal(top)
	if err != nil {
		return res
	}
	return out
}

// offset is where part, a slice of whole, begins in it.
func offset(whole, part []byte) int { return cap(whole) - cap(part) }

// splice is whole with part (a slice of it) replaced by with, in a new
// slice.
func splice(whole, part, with []byte) []byte {
	i := offset(whole, part)
	out := make([]byte, 0, len(whole)-len(part)+len(with))
	out = append(out, whole[:i]...)
	out = append(out, with...)
	return append(out, whole[i+len(part):]...)
}

// insertMember is whole with member (`"key":value`) made the first member
// of obj, an object that is whole or a slice of it, in a new slice.
func insertMember(whole, obj, member []byte) []byte {
	open := bytes.IndexByte(obj, '{') + 1
	i := offset(whole, obj) + open
	empty := bytes.TrimSpace(obj[open:])[0] == '}' // nothing but space inside
	out := make([]byte, 0, len(whole)+len(member)+1)
	out = append(out, whole[:i]...)
	out = append(out, member...)
	if !empty {
		out = append(out, ',')
	}
	return append(out, whole[i:]...)
}

// eraTyped is res, a typed result of the go-sdk's path for a session of
// the current era, as eraResult makes a result that passes through: with
// resultType, which the go-sdk sets only for results of its own handlers,
// and without the server name a backend put in its _meta, where the
// go-sdk then puts mux's (it adds one only where none is). res is encoded
// with those and decoded again into a new result: resultType is not
// exported, and res may be shared. Only the results mux passes on from a
// backend are touched: others are the go-sdk's own or mux's, and one (the
// go-sdk's empty result, a ping's) panics when asked for its _meta.
func eraTyped(res mcp.Result) mcp.Result {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return retyped(r)
	case *mcp.ReadResourceResult:
		return retyped(r)
	case *mcp.GetPromptResult:
		return retyped(r)
	case *mcp.CompleteResult:
		unnamed(r)
	}
	return res
}

// retyped is r encoded, made complete and unnamed, and decoded again.
func retyped[T any, P interface {
	*T
	mcp.Result
}](r P) mcp.Result {
	data, err := json.Marshal(r)
	if err != nil {
		return r
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return r
	}
	if _, ok := top["resultType"]; !ok {
		top["resultType"] = json.RawMessage(`"complete"`)
	}
	if data, err = json.Marshal(top); err != nil {
		return r
	}
	out := P(new(T))
	if json.Unmarshal(data, out) != nil {
		return r
	}
	unnamed(out)
	return out
}

// unnamed takes out of res the server name a backend put in its _meta.
// The map is copied, not changed: a result may be shared.
func unnamed(res mcp.Result) {
	meta := res.GetMeta()
	if _, ok := meta[mcp.MetaKeyServerInfo]; !ok {
		return
	}
	meta = maps.Clone(meta)
	delete(meta, mcp.MetaKeyServerInfo)
	res.SetMeta(meta)
}
