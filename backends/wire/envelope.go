package wire

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// envelope is what could be recovered of the top-level keys of a JSON-RPC
// object the decoder refused, or of which only the head and tail were kept.
type envelope struct {
	id        jsonrpc.ID
	hasID     bool // a top-level "id" that is a string or a number
	hasMethod bool // a top-level "method", of any type
	tagged    bool // a top-level "jsonrpc" (any case), "result" or "error"
}

// isResponse reports whether the object is recognizably a response to a
// request with a usable id. The tag rules out a backend's own JSON log
// lines, which often have an "id" of their own.
func (e envelope) isResponse() bool { return e.hasID && !e.hasMethod && e.tagged }

// recoverEnvelope scans head forwards from the start of an object, and tail
// backwards from its end, collecting top-level keys until each runs out or
// stops making sense. head and tail may be the same, whole line. The id
// found in the head wins: the decoder keeps the last of duplicate keys, but
// an id in the tail is only looked for when the head had none.
func recoverEnvelope(head, tail []byte) envelope {
	var e envelope
	scanForward(bytes.TrimSpace(head), &e)
	if !e.hasID {
		scanBackward(bytes.TrimSpace(tail), &e)
	}
	return e
}

// RecoverResponseID is the id of the response that head and tail (as for
// recoverEnvelope) begin and end, if they are recognizably a response with
// a usable id: what a request that waits for that response is failed by
// when its line cannot be decoded.
func RecoverResponseID(head, tail []byte) (jsonrpc.ID, bool) {
	e := recoverEnvelope(head, tail)
	return e.id, e.isResponse()
}

// scanForward walks s, which starts an object, and records each key at
// depth 1 (a string followed by ':').
func scanForward(s []byte, e *envelope) {
	if len(s) == 0 || s[0] != '{' {
		return
	}
	depth := 0
	for i := 0; i < len(s); {
		switch s[i] {
		case '"':
			end := stringEnd(s, i)
			if end < 0 {
				return // cut short
			}
			if depth == 1 {
				if j := skipSpace(s, end); j < len(s) && s[j] == ':' {
					e.key(s[i:end], s[j+1:])
				}
			}
			i = end
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth <= 0 {
				return
			}
		}
		i++
	}
}

// scanBackward walks s, which ends an object, from its end, and records
// each key at depth 1. Walking back, an unescaped quote always delimits a
// string, so the scan is exact until it reaches the start of s.
func scanBackward(s []byte, e *envelope) {
	if len(s) == 0 || s[len(s)-1] != '}' {
		return
	}
	depth := 0
	for i := len(s) - 1; i >= 0; {
		switch s[i] {
		case '"':
			start := stringStart(s, i)
			if start < 0 {
				return // cut short
			}
			if depth == 1 {
				if j := skipSpace(s, i+1); j < len(s) && s[j] == ':' {
					e.key(s[start:i+1], s[j+1:])
				}
			}
			i = start - 1
			continue
		case '}', ']':
			depth++
		case '{', '[':
			depth--
			if depth <= 0 {
				return
			}
		}
		i--
	}
}

// key records a top-level key (quoted, as on the wire) and, for "id", its
// value, which starts rest.
func (e *envelope) key(k, rest []byte) {
	switch {
	case string(k) == `"id"`:
		if id, ok := scalarID(rest[skipSpace(rest, 0):]); ok {
			e.id, e.hasID = id, true
		}
	case string(k) == `"method"`:
		e.hasMethod = true
	case bytes.EqualFold(k, []byte(`"jsonrpc"`)), string(k) == `"result"`, string(k) == `"error"`:
		e.tagged = true
	}
}

// scalarID decodes a string or number at the start of s the way the
// decoder would: only a complete token followed by ',' or '}' counts.
func scalarID(s []byte) (jsonrpc.ID, bool) {
	end := 0
	switch {
	case len(s) == 0:
		return jsonrpc.ID{}, false
	case s[0] == '"':
		end = stringEnd(s, 0)
	default:
		for end < len(s) && strings.IndexByte("+-.0123456789eE", s[end]) >= 0 {
			end++
		}
	}
	if end <= 0 {
		return jsonrpc.ID{}, false
	}
	if j := skipSpace(s, end); j >= len(s) || (s[j] != ',' && s[j] != '}') {
		return jsonrpc.ID{}, false
	}
	var v any
	if json.Unmarshal(s[:end], &v) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil && id.IsValid()
}

// stringEnd returns the index just past the string starting at s[i] (a
// quote), or -1 if s ends first. Most of a message's bytes are in strings:
// they are skipped with IndexByte, not looked at one by one.
func stringEnd(s []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(s[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		escapes := 0 // the backslashes right before the quote
		for l := j - 1; l > i && s[l] == '\\'; l-- {
			escapes++
		}
		if escapes%2 == 0 {
			return j + 1
		}
		j++
	}
}

// stringStart returns the index of the quote opening the string that the
// quote at s[i] closes, or -1 if s starts first (or inside a run of
// backslashes, which leaves it unknown whether a quote is escaped).
func stringStart(s []byte, i int) int {
	for j := i - 1; j >= 0; j-- {
		if s[j] != '"' {
			continue
		}
		k := j
		for k > 0 && s[k-1] == '\\' {
			k--
		}
		if k == 0 && j > 0 {
			return -1
		}
		if (j-k)%2 == 0 {
			return j
		}
	}
	return -1
}

func skipSpace(s []byte, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
