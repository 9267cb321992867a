package mux

import (
	"bytes"
	"encoding/json"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
)

// A request of the current era (2026-07-28) carries in its _meta what an
// initialize would have said: the protocol version, the client's
// capabilities and, optionally, its name. The go-sdk checks those on every
// request and refuses one it cannot decode; it then names the server in
// the result's _meta. The pass-through does the same for the requests it
// takes, and forwards the agent's _meta to the backend unchanged, as the
// go-sdk's path does.

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

// namedResult is res, a backend's result, with mux named as the server
// in its _meta (mcp.MetaKeyServerInfo), in place of any name the backend
// put there: server/discover names mux, and so does every result a direct
// server sends. The rest of res stays as sent.
func (m *Mux) namedResult(res json.RawMessage) json.RawMessage {
	meta, ok := backends.ObjectMember(res, "_meta")
	if !ok || (meta != nil && !isObject(meta)) {
		return m.namedResultDecoded(res)
	}
	name, ok := backends.ObjectMember(meta, mcp.MetaKeyServerInfo)
	if !ok {
		return m.namedResultDecoded(res)
	}
	member := append([]byte(`"`+mcp.MetaKeyServerInfo+`":`), m.serverInfo...)
	switch {
	case name != nil: // the backend's name: mux's in its place
		return splice(res, name, m.serverInfo)
	case meta != nil: // mux's name first among the backend's _meta
		return insertMember(res, meta, member)
	default:
		return insertMember(res, res, append(append([]byte(`"_meta":{`), member...), '}'))
	}
}

// namedResultDecoded is namedResult for a result the byte scan cannot
// edit in place (escaped or repeated keys, a _meta that is not an
// object): decoded at the top level, and encoded again.
func (m *Mux) namedResultDecoded(res json.RawMessage) json.RawMessage {
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

// unnamed is res, a typed result of the go-sdk's path, without the server
// name a backend put in its _meta, so that the go-sdk puts mux's there
// (it adds one only where none is). The map is copied, not changed: a
// result may be shared. Only the results mux passes on from a backend are
// looked at: others have no backend's _meta, and one (the go-sdk's empty
// result, a ping's) panics when asked for it.
func unnamed(res mcp.Result) {
	switch res.(type) {
	case *mcp.CallToolResult, *mcp.ReadResourceResult, *mcp.GetPromptResult, *mcp.CompleteResult:
	default:
		return
	}
	meta := res.GetMeta()
	if _, ok := meta[mcp.MetaKeyServerInfo]; !ok {
		return
	}
	meta = maps.Clone(meta)
	delete(meta, mcp.MetaKeyServerInfo)
	res.SetMeta(meta)
}
