package relay

// peek finds the top-level "id" and "method" members of a JSON-RPC
// message without decoding it: the relay only needs to know what a line
// is, and a result may be megabytes. For a line that is not one JSON
// object (a batch, garbage) it reports ok false, and the line is passed
// on for the far side to judge.
type msgShape struct {
	id         []byte // the raw id, nil if none
	idAt       [2]int // its span in the line
	method     string
	uri, level string // params.uri and params.level, for the requests replayed
	ok         bool
}

func peek(line []byte) (m msgShape) {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return m
	}
	i++
	for {
		i = skipWS(line, i)
		if i < len(line) && line[i] == '}' {
			m.ok = true
			return m
		}
		ks, ke, ok := str(line, i)
		if !ok {
			return m
		}
		i = skipWS(line, ke)
		if i >= len(line) || line[i] != ':' {
			return m
		}
		i = skipWS(line, i+1)
		vs := i
		ve, ok := skip(line, i)
		if !ok {
			return m
		}
		switch string(line[ks:ke]) {
		case `"id"`:
			m.id, m.idAt = line[vs:ve], [2]int{vs, ve}
		case `"method"`:
			if s, e, ok := str(line, vs); ok {
				m.method = string(line[s+1 : e-1])
			}
		case `"params"`:
			m.uri, m.level = member(line[vs:ve], `"uri"`), member(line[vs:ve], `"level"`)
		}
		i = skipWS(line, ve)
		if i < len(line) && line[i] == ',' {
			i++
			continue
		}
		if i < len(line) && line[i] == '}' {
			m.ok = true
			return m
		}
		return m
	}
}

// member is the string member key of the object obj, unquoted as far as
// the relay needs (a key to compare), or "".
func member(obj []byte, key string) string {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ""
	}
	i++
	for {
		i = skipWS(obj, i)
		ks, ke, ok := str(obj, i)
		if !ok {
			return ""
		}
		i = skipWS(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return ""
		}
		i = skipWS(obj, i+1)
		vs := i
		ve, ok := skip(obj, i)
		if !ok {
			return ""
		}
		if string(obj[ks:ke]) == key {
			return string(obj[vs:ve])
		}
		i = skipWS(obj, ve)
		if i >= len(obj) || obj[i] != ',' {
			return ""
		}
		i++
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// str is the span of the string starting at i, quotes included.
func str(b []byte, i int) (int, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return i, j + 1, true
		}
	}
	return 0, 0, false
}

// skip is the end of the value starting at i.
func skip(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		_, e, ok := str(b, i)
		return e, ok
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				_, e, ok := str(b, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' && b[j] != '\n' {
			j++
		}
		return j, j > i
	}
}
