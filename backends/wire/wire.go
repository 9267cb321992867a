// Package wire is JSON-RPC as bytes, as both sides of mcp-mux read and
// write it: a decoder that matches the go-sdk's at a fraction of its cost,
// scanners that take members and elements out of a message without
// decoding the rest, the recovery of a response's id from a line too
// broken or too long to decode, and pipe I/O with raw system calls. It
// knows nothing of MCP and imports nothing of mcp-mux's.
package wire

import (
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// DecodeMessage decodes one JSON-RPC message exactly as the go-sdk's
// jsonrpc.DecodeMessage does (what it accepts, and the message it makes),
// but without its cost for the messages that make up nearly all traffic:
// the go-sdk's decoder allocates a buffer of tens of KiB per message, which
// was a tenth of mcp-mux's CPU and most of its garbage. A plain envelope (the
// keys jsonrpc, id, method, params, result once each, jsonrpc "2.0", an id
// that is an integer or a string without escapes, a method without escapes,
// nothing after the object) is decoded here; anything else goes to the
// go-sdk's decoder, so every quirk of it stays as it is.
// FuzzDecodeMessageMatchesTheSDK holds the two to the same answers.
func DecodeMessage(line []byte) (jsonrpc.Message, error) {
	if msg, ok := decodePlain(line); ok {
		return msg, nil
	}
	return jsonrpc.DecodeMessage(line)
}

// maxDepth is the go-sdk decoder's nesting limit.
const maxDepth = 1000

// decodePlain decodes line if it is a plain envelope; ok is false if it is
// not (or is not valid), leaving the verdict to the go-sdk's decoder.
func decodePlain(line []byte) (msg jsonrpc.Message, ok bool) {
	p := plainParser{b: line}
	p.ws()
	if !p.eat('{') {
		return nil, false
	}
	var (
		seen             [5]bool // jsonrpc id method params result
		method           string
		id               jsonrpc.ID
		hasID, hasMethod bool
		params, result   []byte
		version          bool
		first            = true
	)
	for {
		key, done, ok := p.member(first)
		if !ok {
			return nil, false
		}
		if done {
			break
		}
		first = false
		k := -1
		// Compared as bytes: no string is made for the key.
		switch string(key) {
		case "jsonrpc":
			k = 0
			s, ok := p.simpleString()
			if !ok || string(s) != "2.0" {
				return nil, false
			}
			version = true
		case "id":
			k = 1
			if id, ok = p.id(); !ok {
				return nil, false
			}
			hasID = true
		case "method":
			k = 2
			m, ok := p.simpleString()
			if !ok {
				return nil, false
			}
			method = methodName(m)
			hasMethod = true
		case "params", "result":
			k = 3
			if string(key) == "result" {
				k = 4
			}
			raw, ok := p.value()
			if !ok {
				return nil, false
			}
			if k == 3 {
				params = raw
			} else {
				result = raw
			}
		default:
			return nil, false // "error", or a key the SDK ignores: its decoder decides
		}
		if seen[k] {
			return nil, false
		}
		seen[k] = true
	}
	p.ws()
	// The envelope's object is one level above its params or result.
	if p.i != len(line) || !version || 1+p.deepest > maxDepth {
		return nil, false
	}
	if hasMethod {
		if result != nil {
			return nil, false
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: clone(params)}, true
	}
	if !hasID || params != nil {
		return nil, false
	}
	return &jsonrpc.Response{ID: id, Result: clone(result)}, true
}

// clone copies a raw value out of the line, whose buffer is reused (nil
// stays nil, as absent).
func clone(raw []byte) json.RawMessage {
	if raw == nil {
		return nil
	}
	return append(json.RawMessage(nil), raw...)
}

type plainParser struct {
	b       []byte
	i       int
	deepest int // the deepest nesting of the values read, the value itself 1
}

func (p *plainParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *plainParser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// member reads an object's next member up to its value: its key (a
// simple string), or done at the object's end. first is whether no member
// came before.
func (p *plainParser) member(first bool) (key []byte, done, ok bool) {
	p.ws()
	if p.eat('}') {
		return nil, true, true
	}
	if !first && !p.eat(',') {
		return nil, false, false
	}
	p.ws()
	if key, ok = p.simpleString(); !ok {
		return nil, false, false
	}
	p.ws()
	if !p.eat(':') {
		return nil, false, false
	}
	p.ws()
	return key, false, true
}

// simpleString reads a string of printable ASCII without escapes, and
// returns its bytes in the line.
func (p *plainParser) simpleString() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// methodName is m as a string: one of the methods that make up nearly all
// traffic costs no allocation.
func methodName(m []byte) string {
	switch string(m) {
	case "tools/call":
		return "tools/call"
	case "resources/read":
		return "resources/read"
	case "notifications/progress":
		return "notifications/progress"
	case "notifications/message":
		return "notifications/message"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "notifications/resources/updated":
		return "notifications/resources/updated"
	case "ping":
		return "ping"
	}
	return string(m)
}

// id reads an id: a simple string, or an integer of at most 15 digits
// (exact as the float64 the go-sdk decodes it to).
func (p *plainParser) id() (jsonrpc.ID, bool) {
	if p.i < len(p.b) && p.b[p.i] == '"' {
		s, ok := p.simpleString()
		if !ok {
			return jsonrpc.ID{}, false
		}
		id, err := jsonrpc.MakeID(string(s))
		return id, err == nil
	}
	start := p.i
	p.eat('-')
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 || n > 15 || (n > 1 && p.b[digits] == '0') {
		return jsonrpc.ID{}, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return jsonrpc.ID{}, false
		}
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(float64(v))
	return id, err == nil
}

// value reads one JSON object or array and returns its bytes, if valid.
// Other values (null, numbers, strings) are left to the SDK's decoder.
func (p *plainParser) value() ([]byte, bool) {
	if p.i >= len(p.b) || (p.b[p.i] != '{' && p.b[p.i] != '[') {
		return nil, false
	}
	start := p.i
	depth := 0
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '"':
			if p.i = stringEnd(p.b, p.i); p.i < 0 {
				return nil, false
			}
			continue
		case '{', '[':
			depth++
			p.deepest = max(p.deepest, depth)
		case '}', ']':
			depth--
			if depth == 0 {
				p.i++
				raw := p.b[start:p.i]
				return raw, json.Valid(raw)
			}
		}
		p.i++
	}
	return nil, false
}

// ObjectMembers splits raw, a JSON object that a decoded message carried
// (so valid JSON), into its members: each value is a slice of raw, not a
// copy. ok is false if raw is not an object, or a key has escapes or is
// there twice: such params are for the go-sdk's decoder to judge.
func ObjectMembers(raw []byte) (members map[string]json.RawMessage, ok bool) {
	members = make(map[string]json.RawMessage, 4)
	if !eachMember(raw, func(key, value []byte) bool {
		if _, twice := members[string(key)]; twice {
			return false
		}
		members[string(key)] = value
		return true
	}) {
		return nil, false
	}
	return members, true
}

// Member is a member of a JSON object: its key, as written between the
// quotes, and its value, both slices of the object's bytes.
type Member struct {
	Key   []byte
	Value json.RawMessage
}

// linearMembers is how many members AppendMembers compares a key with
// before it keeps the keys in a map: an object of a backend may have any
// number, and comparing each with every other would be quadratic.
const linearMembers = 16

// AppendMembers is ObjectMembers without the map: raw's members, in their
// order, appended to dst (ok false in the same cases). Given a small
// array's slice, it splits a request's params or a result with no
// allocation.
func AppendMembers(dst []Member, raw []byte) (_ []Member, ok bool) {
	start := len(dst)
	var seen map[string]bool
	if !eachMember(raw, func(key, value []byte) bool {
		n := len(dst) - start
		switch {
		case n < linearMembers:
			for _, m := range dst[start:] {
				if string(m.Key) == string(key) {
					return false
				}
			}
		default:
			if seen == nil {
				seen = make(map[string]bool, 2*linearMembers)
				for _, m := range dst[start:] {
					seen[string(m.Key)] = true
				}
			}
			if seen[string(key)] {
				return false
			}
			seen[string(key)] = true
		}
		dst = append(dst, Member{key, value})
		return true
	}) {
		return dst[:start], false
	}
	return dst, true
}

// Lookup is the value of key among members, or nil.
func Lookup(members []Member, key string) json.RawMessage {
	for _, m := range members {
		if string(m.Key) == key {
			return m.Value
		}
	}
	return nil
}

// ObjectMember finds key's value in raw, a JSON object of valid JSON, as a
// slice of raw (nil if key is absent), without splitting out the other
// members. ok is false if raw is not an object, or a key has escapes (it
// might be key, written another way) or key is there twice: encoding/json
// is the judge of those.
func ObjectMember(raw []byte, key string) (value json.RawMessage, ok bool) {
	if !eachMember(raw, func(k, v []byte) bool {
		if string(k) != key {
			return true
		}
		if value != nil {
			return false
		}
		value = v
		return true
	}) {
		return nil, false
	}
	return value, true
}

// eachMember calls f with each member of raw, a JSON object of valid JSON
// (its key and value, slices of raw), and reports whether raw is such an
// object with simple keys and f returned true for every member.
func eachMember(raw []byte, f func(key, value []byte) bool) bool {
	p := plainParser{b: raw}
	p.ws()
	if !p.eat('{') {
		return false
	}
	for first := true; ; first = false {
		key, done, ok := p.member(first)
		if !ok {
			return false
		}
		if done {
			break
		}
		v, ok := p.skipValue()
		if !ok || !f(key, v) {
			return false
		}
	}
	p.ws()
	return p.i == len(p.b)
}

// ArrayElements splits raw, a JSON array of valid JSON, into its elements,
// each a slice of raw, not a copy. ok is false if raw is not an array.
func ArrayElements(raw []byte) (elems []json.RawMessage, ok bool) {
	p := plainParser{b: raw}
	p.ws()
	if !p.eat('[') {
		return nil, false
	}
	p.ws()
	elems = []json.RawMessage{}
	if !p.eat(']') {
		for {
			p.ws()
			v, ok := p.skipValue()
			if !ok {
				return nil, false
			}
			elems = append(elems, v)
			p.ws()
			if p.eat(']') {
				break
			}
			if !p.eat(',') {
				return nil, false
			}
		}
	}
	p.ws()
	return elems, p.i == len(p.b)
}

// skipValue reads one value of valid JSON and returns its bytes.
func (p *plainParser) skipValue() ([]byte, bool) {
	if p.i >= len(p.b) {
		return nil, false
	}
	start := p.i
	depth := 0
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '"':
			if p.i = stringEnd(p.b, p.i); p.i < 0 {
				p.i = len(p.b)
				return nil, false
			}
			if depth == 0 { // a string value
				return p.b[start:p.i], true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the end of the object this value is in
				return p.b[start:p.i], p.i > start
			}
			if depth--; depth == 0 {
				p.i++
				return p.b[start:p.i], true
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 { // after a number or literal
				return p.b[start:p.i], p.i > start
			}
		}
		p.i++
	}
	return p.b[start:p.i], depth == 0 && p.i > start
}

// PipeAtomic is the most bytes a pipe takes in one write whole or not at
// all (PIPE_BUF on Linux): what PipeIO's TryWrite writes at most.
const PipeAtomic = 4096
