package search

import (
	"encoding/json"
	"slices"
	"strings"
)

// paramText is the text of a tool's parameters: each property's name and
// description, nested properties, array items and anyOf/oneOf/allOf
// alternatives included (to a depth of three), but not the schema's $defs.
// The names of the top-level properties are also returned apart: their
// words, marked (=url, =path), are what a query's URL or path stands for
// (queryTerms).
//
// It reads the schema with a scanner of its own, which only looks for
// those few keys: encoding/json took half of New's time on the real
// catalog. A schema that is not valid JSON gives nothing.
func paramText(schema json.RawMessage) (text string, names []string) {
	s := scanner{b: schema}
	var root schemaNode
	s.ws()
	if s.i >= len(s.b) {
		return "", nil
	}
	s.value(&root)
	if s.bad {
		return "", nil
	}
	var sb strings.Builder
	var walk func(n *schemaNode, depth int)
	walk = func(n *schemaNode, depth int) {
		if n == nil || depth > 3 {
			return
		}
		props := slices.Clone(n.props)
		slices.SortStableFunc(props, func(a, b prop) int { return strings.Compare(a.name, b.name) })
		for _, p := range props {
			if depth == 0 {
				names = append(names, p.name)
			}
			sb.WriteString(p.name)
			sb.WriteByte(' ')
			sb.WriteString(p.node.description)
			sb.WriteByte(' ')
			walk(p.node, depth+1)
		}
		for _, c := range n.children {
			walk(c, depth+1)
		}
	}
	walk(&root, 0)
	return sb.String(), names
}

// schemaNode is what paramText reads of a JSON schema: its description,
// its properties, and its items and alternatives (children).
type schemaNode struct {
	description string
	props       []prop
	children    []*schemaNode
}

type prop struct {
	name string
	node *schemaNode
}

// scanner reads JSON: value fills a schemaNode from an object and skips
// everything paramText does not read.
type scanner struct {
	b   []byte
	i   int
	bad bool
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\n' || s.b[s.i] == '\t' || s.b[s.i] == '\r') {
		s.i++
	}
}

// value reads one value. An object is read into n when n is not nil;
// anything else is skipped.
func (s *scanner) value(n *schemaNode) {
	s.ws()
	if s.i >= len(s.b) {
		s.bad = true
		return
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.object(n)
	case c == '[':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return
		}
		for !s.bad {
			s.value(nil)
			if !s.next(']') {
				return
			}
		}
	case c == '"':
		s.str()
	default: // a number, true, false, null
		start := s.i
		for s.i < len(s.b) && !strings.ContainsRune(",]} \n\t\r", rune(s.b[s.i])) {
			s.i++
		}
		if s.i == start {
			s.bad = true
		}
	}
}

// next reads a comma (true: more to come) or the closing byte (false).
func (s *scanner) next(closing byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ',' {
		s.i++
		return true
	}
	if s.i < len(s.b) && s.b[s.i] == closing {
		s.i++
	} else {
		s.bad = true
	}
	return false
}

func (s *scanner) object(n *schemaNode) {
	s.members(func(key string) {
		switch {
		case n == nil:
			s.value(nil)
		case key == "description" && s.i < len(s.b) && s.b[s.i] == '"':
			n.description = s.str()
		case key == "properties" && s.i < len(s.b) && s.b[s.i] == '{':
			s.properties(n)
		case key == "items" && s.i < len(s.b) && s.b[s.i] == '{':
			c := &schemaNode{}
			n.children = append(n.children, c)
			s.value(c)
		case (key == "anyOf" || key == "oneOf" || key == "allOf") && s.i < len(s.b) && s.b[s.i] == '[':
			s.alternatives(n)
		default:
			s.value(nil)
		}
	})
}

func (s *scanner) properties(n *schemaNode) {
	s.members(func(name string) {
		c := &schemaNode{}
		n.props = append(n.props, prop{name, c})
		s.value(c)
	})
}

// members scans the object at s.i, calling member with each key once s.i
// is at its value, which member scans.
func (s *scanner) members(member func(key string)) {
	s.i++ // {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return
	}
	for !s.bad {
		s.ws()
		key := s.str()
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			s.bad = true
			return
		}
		s.i++
		s.ws()
		member(key)
		if !s.next('}') {
			return
		}
	}
}

func (s *scanner) alternatives(n *schemaNode) {
	s.i++ // [
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return
	}
	for !s.bad {
		c := &schemaNode{}
		n.children = append(n.children, c)
		s.value(c)
		if !s.next(']') {
			return
		}
	}
}

// str reads a string and returns it unquoted.
func (s *scanner) str() string {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.bad = true
		return ""
	}
	start := s.i
	s.i++
	escaped := false
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			escaped = true
			s.i += 2
			continue
		case '"':
			s.i++
			if !escaped {
				return string(s.b[start+1 : s.i-1])
			}
			var out string
			if json.Unmarshal(s.b[start:s.i], &out) != nil {
				s.bad = true
			}
			return out
		}
		s.i++
	}
	s.bad = true
	return ""
}
