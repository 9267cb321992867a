package config

import (
	"bytes"
	"sort"
	"strconv"
	"strings"
)

// The line index: a small TOML key scanner that records the line where each
// key path is defined, because the TOML library does not expose it.

// scanKeyLines returns the line (1-based) where each key path is first
// defined, e.g. "mux" (the [mux] header), "mux.name", "backend[2]" (the
// header of the third [[backend]]), "backend[2].env.TOKEN",
// "backend[0].args[1]". It is meant for files the TOML parser accepted; on
// anything else it does its best and never panics.
func scanKeyLines(data []byte) map[string]int { return scanFile(data).lines }

func scanFile(data []byte) *lineScanner {
	s := &lineScanner{data: data, lines: map[string]int{}, arrays: map[string]int{}}
	for i, c := range data {
		if c == '\n' {
			s.nl = append(s.nl, i)
		}
	}
	if len(data) >= 3 && string(data[:3]) == "\xef\xbb\xbf" {
		s.pos = 3
	}
	s.run()
	return s
}

type lineScanner struct {
	data   []byte
	pos    int
	nl     []int          // offsets of '\n'
	lines  map[string]int // key path → line
	arrays map[string]int // [[array]] path (unindexed last segment) → count so far
	table  keyPath        // current table

	depth   int // nesting of arrays and inline tables
	tooDeep int // line where depth exceeded maxNesting, 0 if never

	// early is the first header of a table within a backend
	// ([[backend.override]], [backend.env]) met before any [[backend]]:
	// TOML then makes backend a table, and says so only at the
	// [[backend]] after it, or not at all.
	early struct {
		line   int
		header string
	}
}

func (s *lineScanner) lineAt(pos int) int { return sort.SearchInts(s.nl, pos) + 1 }

func (s *lineScanner) record(k keyPath, pos int) {
	key := k.String()
	if _, ok := s.lines[key]; !ok {
		s.lines[key] = s.lineAt(pos)
	}
}

func (s *lineScanner) eof() bool { return s.pos >= len(s.data) }

func (s *lineScanner) peek(str string) bool {
	return bytes.HasPrefix(s.data[min(s.pos, len(s.data)):], []byte(str))
}

func (s *lineScanner) skipWS() {
	for !s.eof() && (s.data[s.pos] == ' ' || s.data[s.pos] == '\t') {
		s.pos++
	}
}

// skipSpace skips whitespace, newlines and comments.
func (s *lineScanner) skipSpace() {
	for !s.eof() {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		case '#':
			for !s.eof() && s.data[s.pos] != '\n' {
				s.pos++
			}
		default:
			return
		}
	}
}

func (s *lineScanner) run() {
	for {
		s.skipSpace()
		if s.eof() {
			return
		}
		start := s.pos
		if s.data[s.pos] == '[' {
			s.header()
		} else {
			s.keyValue(s.table)
		}
		// Whatever follows a statement on its line is a comment (or junk).
		for !s.eof() && s.data[s.pos] != '\n' {
			s.pos++
		}
		if s.pos == start {
			s.pos++
		}
	}
}

func (s *lineScanner) header() {
	hpos := s.pos
	array := s.peek("[[")
	if array {
		s.pos += 2
	} else {
		s.pos++
	}
	keys := s.key()
	if len(keys) == 0 {
		return
	}
	if _, seen := s.lines["backend"]; len(keys) > 1 && keys[0] == "backend" && !seen {
		s.early.line = s.lineAt(hpos)
		s.early.header = "[" + strings.Join(keys, ".") + "]"
		if array {
			s.early.header = "[" + s.early.header + "]"
		}
	}
	var path keyPath
	for i, k := range keys {
		path = path.child(k)
		if i == len(keys)-1 && array {
			key := path.String()
			n := s.arrays[key]
			s.arrays[key] = n + 1
			s.record(path, hpos)
			path = path.index(n)
		} else if n := s.arrays[path.String()]; n > 0 {
			path = path.index(n - 1)
		}
		s.record(path, hpos)
	}
	s.table = path
}

// key reads a dotted key and returns its raw segments.
func (s *lineScanner) key() []string {
	var keys []string
	for {
		s.skipWS()
		if s.eof() {
			return keys
		}
		switch c := s.data[s.pos]; c {
		case '"':
			keys = append(keys, s.basicString())
		case '\'':
			keys = append(keys, s.literalString())
		default:
			start := s.pos
			for !s.eof() && isBareKeyByte(s.data[s.pos]) {
				s.pos++
			}
			if s.pos == start {
				return keys
			}
			keys = append(keys, string(s.data[start:s.pos]))
		}
		s.skipWS()
		if s.eof() || s.data[s.pos] != '.' {
			return keys
		}
		s.pos++
	}
}

func isBareKeyByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func (s *lineScanner) keyValue(base keyPath) {
	kpos := s.pos
	keys := s.key()
	if len(keys) == 0 {
		return
	}
	s.skipWS()
	if s.eof() || s.data[s.pos] != '=' {
		return
	}
	s.pos++
	s.skipWS()
	path := base
	for _, k := range keys {
		path = path.child(k)
		s.record(path, kpos)
	}
	s.value(path)
}

func (s *lineScanner) value(path keyPath) {
	if s.eof() {
		return
	}
	if c := s.data[s.pos]; c == '[' || c == '{' {
		if s.depth >= maxNesting {
			s.tooDeep = s.lineAt(s.pos)
			s.pos = len(s.data) // stop scanning
			return
		}
		s.depth++
		defer func() { s.depth-- }()
	}
	switch s.data[s.pos] {
	case '"':
		if s.peek(`"""`) {
			s.multiline('"', true)
		} else {
			s.basicString()
		}
	case '\'':
		if s.peek(`'''`) {
			s.multiline('\'', false)
		} else {
			s.literalString()
		}
	case '[':
		s.pos++
		for i := 0; ; {
			s.skipSpace()
			if s.eof() {
				return
			}
			switch s.data[s.pos] {
			case ']':
				s.pos++
				return
			case ',':
				s.pos++
				continue
			}
			before := s.pos
			elem := path.index(i)
			s.record(elem, s.pos)
			s.value(elem)
			i++
			if s.pos == before {
				s.pos++
			}
		}
	case '{':
		s.pos++
		for {
			s.skipSpace()
			if s.eof() {
				return
			}
			switch s.data[s.pos] {
			case '}':
				s.pos++
				return
			case ',':
				s.pos++
				continue
			}
			before := s.pos
			s.keyValue(path)
			if s.pos == before {
				s.pos++
			}
		}
	default: // number, boolean, date-time
		for !s.eof() && !strings.ContainsRune(",]}#\r\n", rune(s.data[s.pos])) {
			s.pos++
		}
	}
}

// basicString reads a "..." string (one line) and returns it unescaped.
func (s *lineScanner) basicString() string {
	s.pos++ // opening quote
	start := s.pos
	for !s.eof() && s.data[s.pos] != '"' && s.data[s.pos] != '\n' {
		if s.data[s.pos] == '\\' {
			s.pos++
		}
		s.pos++
	}
	end := min(s.pos, len(s.data))
	if !s.eof() && s.data[s.pos] == '"' {
		s.pos++
	}
	return unescapeTOML(s.data[start:end])
}

// literalString reads a '...' string (one line).
func (s *lineScanner) literalString() string {
	s.pos++
	start := s.pos
	for !s.eof() && s.data[s.pos] != '\'' && s.data[s.pos] != '\n' {
		s.pos++
	}
	str := string(s.data[start:s.pos])
	if !s.eof() && s.data[s.pos] == '\'' {
		s.pos++
	}
	return str
}

// multiline skips a multi-line string (three quotes, " or ').
func (s *lineScanner) multiline(q byte, escapes bool) {
	delim := strings.Repeat(string(q), 3)
	s.pos += 3
	for !s.eof() {
		if escapes && s.data[s.pos] == '\\' {
			s.pos += 2
			continue
		}
		if s.peek(delim) {
			s.pos += 3
			// Up to two more quotes belong to the content.
			for i := 0; i < 2 && !s.eof() && s.data[s.pos] == q; i++ {
				s.pos++
			}
			return
		}
		s.pos++
	}
}

// unescapeTOML decodes the escapes of a TOML basic string.
func unescapeTOML(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	var sb strings.Builder
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' || i+1 >= len(b) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch b[i] {
		case 'b':
			sb.WriteByte('\b')
		case 't':
			sb.WriteByte('\t')
		case 'n':
			sb.WriteByte('\n')
		case 'f':
			sb.WriteByte('\f')
		case 'r':
			sb.WriteByte('\r')
		case 'e':
			sb.WriteByte(0x1b)
		case '"', '\\':
			sb.WriteByte(b[i])
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[b[i]]
			if i+1+n <= len(b) {
				if r, err := strconv.ParseUint(string(b[i+1:i+1+n]), 16, 32); err == nil {
					sb.WriteRune(rune(r))
					i += n
					continue
				}
			}
			sb.WriteByte('\\')
			sb.WriteByte(b[i])
		default:
			sb.WriteByte('\\')
			sb.WriteByte(b[i])
		}
	}
	return sb.String()
}
