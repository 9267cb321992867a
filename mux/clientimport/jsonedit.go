package clientimport

// Editing a client's JSON file in place for `import --apply`: the file is
// scanned for where each value starts and ends (// and /* */ comments and
// trailing commas allowed, as VS Code's and Cursor's files have them), and
// only the bytes of what changes are replaced. Re-marshalling the file
// would lose its comments, key order and indentation, and Claude Code's
// ~/.claude.json holds much more than servers.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// jvalue is where one JSON value is in the file.
type jvalue struct {
	start, end int  // its bytes: data[start:end]
	kind       byte // '{', '[', '"', or 0 for a number, true, false or null
	members    []jmember
}

// jmember is a member of an object (key set) or an element of an array.
type jmember struct {
	key      string
	keyStart int // the key's opening quote; for an element, val.start
	val      *jvalue
	comma    int // the comma after it, -1 if none
}

// maxJSONDepth bounds the scanner's recursion: a file nested deeper is no
// client's config, and must not exhaust the stack.
const maxJSONDepth = 500

type jscanner struct {
	data []byte
	pos  int
}

// scanJSONC finds the spans of data's values. data must be one object.
func scanJSONC(data []byte) (*jvalue, error) {
	s := &jscanner{data: data}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		s.pos = 3
	}
	s.skip()
	if s.pos >= len(data) || data[s.pos] != '{' {
		return nil, s.errorf("expected a JSON object")
	}
	v, err := s.value(0)
	if err != nil {
		return nil, err
	}
	s.skip()
	if s.pos != len(data) {
		return nil, s.errorf("more after the object")
	}
	return v, nil
}

func (s *jscanner) errorf(format string, args ...any) error {
	line := 1 + bytes.Count(s.data[:min(s.pos, len(s.data))], []byte("\n"))
	return fmt.Errorf("line %d: not valid JSON: %s", line, fmt.Sprintf(format, args...))
}

// skip passes blanks and comments.
func (s *jscanner) skip() {
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s.pos++
		case c == '/' && s.pos+1 < len(s.data) && s.data[s.pos+1] == '/':
			for s.pos < len(s.data) && s.data[s.pos] != '\n' {
				s.pos++
			}
		case c == '/' && s.pos+1 < len(s.data) && s.data[s.pos+1] == '*':
			end := bytes.Index(s.data[s.pos+2:], []byte("*/"))
			if end < 0 {
				s.pos = len(s.data)
				return
			}
			s.pos += 2 + end + 2
		default:
			return
		}
	}
}

func (s *jscanner) value(depth int) (*jvalue, error) {
	if depth > maxJSONDepth {
		return nil, s.errorf("nested more than %d deep", maxJSONDepth)
	}
	s.skip()
	if s.pos >= len(s.data) {
		return nil, s.errorf("the file ends in the middle of a value")
	}
	v := &jvalue{start: s.pos}
	switch c := s.data[s.pos]; c {
	case '{', '[':
		v.kind = c
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		s.pos++
		for {
			s.skip()
			if s.pos >= len(s.data) {
				return nil, s.errorf("the file ends in the middle of a value")
			}
			if s.data[s.pos] == closing {
				s.pos++
				break
			}
			if n := len(v.members); n > 0 && v.members[n-1].comma < 0 {
				return nil, s.errorf("expected a comma or %q", closing)
			}
			m := jmember{keyStart: s.pos, comma: -1}
			if c == '{' {
				if s.data[s.pos] != '"' {
					return nil, s.errorf("expected a key")
				}
				k, err := s.value(depth + 1)
				if err != nil {
					return nil, err
				}
				if err := json.Unmarshal(s.data[k.start:k.end], &m.key); err != nil {
					return nil, s.errorf("a key is not a valid string")
				}
				s.skip()
				if s.pos >= len(s.data) || s.data[s.pos] != ':' {
					return nil, s.errorf("expected a colon after a key")
				}
				s.pos++
			}
			val, err := s.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m.val = val
			s.skip()
			if s.pos < len(s.data) && s.data[s.pos] == ',' {
				m.comma = s.pos
				s.pos++
			}
			v.members = append(v.members, m)
		}
	case '"':
		v.kind = '"'
		s.pos++
		for {
			if s.pos >= len(s.data) || s.data[s.pos] == '\n' {
				return nil, s.errorf("a string is not closed")
			}
			if s.data[s.pos] == '\\' {
				s.pos += 2
				continue
			}
			s.pos++
			if s.data[s.pos-1] == '"' {
				break
			}
		}
	default:
		for s.pos < len(s.data) && strings.IndexByte("+-.0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", s.data[s.pos]) >= 0 {
			s.pos++
		}
		if s.pos == v.start || !json.Valid(s.data[v.start:s.pos]) {
			return nil, s.errorf("unexpected %q", s.data[v.start:max(s.pos, v.start+1)])
		}
	}
	v.end = s.pos
	return v, nil
}

// get is the member key of object v, nil if there is none (or v is no
// object). A key given twice is its last member, as JSON parsers take it.
func (v *jvalue) get(key string) *jvalue {
	if v == nil || v.kind != '{' {
		return nil
	}
	var out *jvalue
	for _, m := range v.members {
		if m.key == key {
			out = m.val
		}
	}
	return out
}

// lookup follows keys from v.
func (v *jvalue) lookup(keys ...string) *jvalue {
	for _, k := range keys {
		v = v.get(k)
	}
	return v
}

// splice replaces data[start:end] with text.
type splice struct {
	start, end int
	text       string
}

// applySplices applies non-overlapping splices to data.
func applySplices(data []byte, edits []splice) []byte {
	out := make([]byte, 0, len(data))
	pos := 0
	for _, e := range sortedSplices(edits) {
		out = append(out, data[pos:e.start]...)
		out = append(out, e.text...)
		pos = e.end
	}
	return append(out, data[pos:]...)
}

func sortedSplices(edits []splice) []splice {
	out := append([]splice(nil), edits...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].start < out[j-1].start; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// lineIndent is the run of blanks that starts the line pos is on, and
// whether only blanks come before pos on it.
func lineIndent(data []byte, pos int) (indent string, alone bool) {
	ls := bytes.LastIndexByte(data[:pos], '\n') + 1
	i := ls
	for i < pos && (data[i] == ' ' || data[i] == '\t') {
		i++
	}
	return string(data[ls:i]), i == pos
}

// indentUnit is one level of the file's indentation: how much deeper
// obj's members are than obj's own line, or else two spaces.
func indentUnit(data []byte, obj *jvalue) (member, unit string) {
	own, _ := lineIndent(data, obj.start)
	for _, m := range obj.members {
		if ind, alone := lineIndent(data, m.keyStart); alone && strings.HasPrefix(ind, own) && len(ind) > len(own) {
			return ind, ind[len(own):]
		}
	}
	unit = "  "
	if strings.HasPrefix(own, "\t") {
		unit = "\t"
	}
	return own + unit, unit
}

// marshalIndented writes v as JSON indented like a member at indent, in
// steps of unit, with no HTML escaping (a path may hold "&").
func marshalIndented(v any, indent, unit string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	var out bytes.Buffer
	json.Indent(&out, bytes.TrimRight(b.Bytes(), "\n"), indent, unit)
	return out.String()
}

// marshalCompact writes v as JSON on one line, with a space after each
// colon and comma, as people write it.
func marshalCompact(v any) string {
	flat := marshalIndented(v, "", "")
	flat = strings.ReplaceAll(flat, "\n", " ")
	flat = strings.ReplaceAll(flat, "[ ", "[")
	flat = strings.ReplaceAll(flat, " ]", "]")
	flat = strings.ReplaceAll(flat, "{ ", "{")
	return strings.ReplaceAll(flat, " }", "}")
}

// replaceMembers is the splice that removes the members of object obj
// whose key is in remove, and puts the member key: entry where the first
// of them was, indented as its siblings are; and that member as written. Everything else inside obj
// (members kept, comments between them, a trailing comma) stays as it is;
// a member removed that stood on lines of its own takes its lines with it.
func replaceMembers(data []byte, obj *jvalue, remove map[string]bool, key string, entry any) (sp splice, member string, ok bool) {
	drop := map[int]bool{}
	first := -1
	for i, m := range obj.members {
		if remove[m.key] {
			drop[i] = true
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return splice{}, "", false
	}
	memberIndent, unit := indentUnit(data, obj)
	keyJSON, _ := json.Marshal(key)
	text := string(keyJSON) + ": " + marshalIndented(entry, memberIndent, unit)
	if _, alone := lineIndent(data, obj.members[first].keyStart); !alone {
		text = string(keyJSON) + ": " + marshalCompact(entry) // an object on one line stays on one
	}
	return editMembers(data, obj, drop, first, []string{text}), text, true
}

// editMembers is the splice that removes the members (or elements) of
// obj whose index is in drop, and puts texts (members or elements as
// written, in order) where the member at index at was (at is one of drop,
// or -1 to put nothing). Everything else inside obj stays as it is; a
// member removed that stood on lines of its own takes its lines with it.
func editMembers(data []byte, obj *jvalue, drop map[int]bool, at int, texts []string) splice {
	text := ""
	if at >= 0 {
		sep := " "
		if ind, alone := lineIndent(data, obj.members[at].keyStart); alone {
			sep = "\n" + ind
		}
		text = strings.Join(texts, ","+sep)
	}
	last := -1 // the last member left, or put in at
	for i := range obj.members {
		if !drop[i] || (i == at && len(texts) > 0) {
			last = i
		}
	}
	n := len(obj.members)
	trailing := n > 0 && obj.members[n-1].comma >= 0
	inner := obj.start + 1
	var b strings.Builder
	pos := inner
	for i, m := range obj.members {
		after := m.val.end
		if m.comma >= 0 {
			after = m.comma + 1
		}
		if drop[i] && (i != at || len(texts) == 0) {
			start, end := m.keyStart, after
			if _, alone := lineIndent(data, start); alone {
				start = bytes.LastIndexByte(data[:start], '\n') + 1
				end = skipLineRest(data, end)
			} else {
				// On a line with others: the blanks after it go, or,
				// when it is last, those before it.
				e := end
				for e < obj.end-1 && (data[e] == ' ' || data[e] == '\t') {
					e++
				}
				if e < obj.end-1 {
					end = e
				} else {
					for start > pos && (data[start-1] == ' ' || data[start-1] == '\t') {
						start--
					}
				}
			}
			b.Write(data[pos:max(pos, start)])
			pos = max(pos, end)
			continue
		}
		b.Write(data[pos:m.keyStart])
		if i == at {
			b.WriteString(text)
		} else {
			b.Write(data[m.keyStart:m.val.end])
		}
		if m.comma >= 0 {
			b.Write(data[m.val.end:m.comma]) // a comment before the comma
		}
		if last != i || trailing {
			b.WriteByte(',')
		}
		pos = after
	}
	b.Write(data[pos : obj.end-1])
	return splice{start: inner, end: obj.end - 1, text: b.String()}
}

// skipLineRest passes, from pos, blanks and comments to the end of the
// line, and the line break: the rest of a line that a removed member
// stood on. A line with more on it is left from pos on.
func skipLineRest(data []byte, pos int) int {
	i := pos
	for {
		for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r') {
			i++
		}
		if i+1 < len(data) && data[i] == '/' && data[i+1] == '*' {
			end := bytes.Index(data[i+2:], []byte("*/"))
			if end < 0 || bytes.IndexByte(data[i+2:i+2+end], '\n') >= 0 {
				return pos // a comment of more lines is not this line's
			}
			i += 2 + end + 2
			continue
		}
		break
	}
	if i+1 < len(data) && data[i] == '/' && data[i+1] == '/' {
		for i < len(data) && data[i] != '\n' {
			i++
		}
	}
	if i < len(data) && data[i] == '\n' {
		return i + 1
	}
	if i == len(data) {
		return i
	}
	return pos
}

// appendElements is the splice that adds items (JSON values, written as
// they are) at the end of array arr, laid out as its elements are: one per
// line at their indentation, or on one line.
func appendElements(data []byte, arr *jvalue, items []string) splice {
	n := len(arr.members)
	if n == 0 {
		return splice{start: arr.start + 1, end: arr.end - 1, text: strings.Join(items, ", ")}
	}
	last := arr.members[n-1].val
	sep := " "
	if ind, alone := lineIndent(data, last.start); alone {
		sep = "\n" + ind
	}
	var b strings.Builder
	for _, it := range items {
		b.WriteString("," + sep + it)
	}
	return splice{start: last.end, end: last.end, text: b.String()}
}
