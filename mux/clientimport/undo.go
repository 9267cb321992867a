package clientimport

// What `import --apply` changed in a client's JSON file, recorded for
// `import --undo`, which takes it back from the file as it is by then:
// the clients rewrite their files (Claude Code on every start: counters,
// each project's state), and users edit them, so the file is never
// compared whole. Only the servers and rules --apply wrote must be as it
// wrote them; everything else that changed since stays.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Change is what --apply did to one object (a servers object) or array (a
// list of permission rules) of a client's file.
type Change struct {
	At      []string `json:"at"`                // its keys from the top of the file
	Before  string   `json:"before"`            // its text before --apply
	After   string   `json:"after"`             // and as --apply wrote it
	Indent  string   `json:"indent,omitempty"`  // an object's members' indentation then
	Removed []string `json:"removed,omitempty"` // the members it took out, as written ("name": value)
	Added   []string `json:"added,omitempty"`   // the members (of an object) or elements (of an array) it put in
}

// Where names what c changed, as a user finds it in the file.
func (c Change) Where() string {
	parts := make([]string, len(c.At))
	for i, k := range c.At {
		parts[i] = k
		if strings.ContainsAny(k, `./\ "`) || k == "" {
			parts[i] = strconv.Quote(k)
		}
	}
	return strings.Join(parts, ".")
}

// Undo is data, a client's file (from path) as it is now, with c taken
// back: the object or array as it was, when it is still as --apply wrote
// it; else only what --apply put in it taken out again and what it took
// out put back, where it was, with every member added since kept. It
// fails, changing nothing, when a member --apply wrote in an object is
// gone or changed, or one it took out is back and different: the user
// changed those very entries. An array's elements gone since are gone.
func Undo(path string, data []byte, c Change) ([]byte, error) {
	root, err := scanJSONC(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v := root.lookup(c.At...)
	if v == nil || v.kind != '{' && v.kind != '[' {
		if len(c.Before) > 0 && c.Before[0] == '[' {
			return data, nil // the list is gone, and the rules --apply added with it
		}
		return nil, fmt.Errorf("%s: its %s is gone since --apply", path, c.Where())
	}
	if string(data[v.start:v.end]) == c.After {
		return applySplices(data, []splice{{start: v.start, end: v.end, text: c.Before}}), nil
	}
	drop := map[int]bool{}
	if v.kind == '[' {
		for _, a := range c.Added {
			for i := len(v.members) - 1; i >= 0; i-- {
				if m := v.members[i]; !drop[i] && sameJSON(data[m.val.start:m.val.end], []byte(a)) {
					drop[i] = true
					break
				}
			}
		}
		if len(drop) == 0 {
			return data, nil
		}
		return applySplices(data, []splice{editMembers(data, v, drop, -1, nil)}), nil
	}
	index := func(key string) int {
		for i := len(v.members) - 1; i >= 0; i-- {
			if v.members[i].key == key {
				return i
			}
		}
		return -1
	}
	at := -1
	for _, a := range c.Added {
		key, val, err := memberText(a)
		if err != nil {
			return nil, fmt.Errorf("%s: the record of --apply: %w", path, err)
		}
		i := index(key)
		switch {
		case i < 0:
			return nil, fmt.Errorf("%s: mcp-mux's entry %q in its %s is gone since --apply", path, key, c.Where())
		case !sameJSON(data[v.members[i].val.start:v.members[i].val.end], val):
			return nil, fmt.Errorf("%s: mcp-mux's entry %q in its %s was changed since --apply", path, key, c.Where())
		}
		drop[i] = true
		if at < 0 {
			at = i
		}
	}
	indent, _ := indentUnit(data, v)
	var texts []string
	for _, r := range c.Removed {
		key, val, err := memberText(r)
		if err != nil {
			return nil, fmt.Errorf("%s: the record of --apply: %w", path, err)
		}
		if i := index(key); i >= 0 && !drop[i] {
			if sameJSON(data[v.members[i].val.start:v.members[i].val.end], val) {
				continue // put back already
			}
			return nil, fmt.Errorf("%s: %q in its %s is back since --apply, and differs from what --apply took out", path, key, c.Where())
		}
		if c.Indent != "" && c.Indent != indent {
			r = strings.ReplaceAll(r, "\n"+c.Indent, "\n"+indent)
		}
		texts = append(texts, r)
	}
	return applySplices(data, []splice{editMembers(data, v, drop, at, texts)}), nil
}

// memberText splits a member as written ("name": value) into its key and
// its value's text.
func memberText(text string) (string, []byte, error) {
	obj, err := scanJSONC([]byte("{" + text + "}"))
	if err != nil || len(obj.members) != 1 {
		return "", nil, fmt.Errorf("not one member: %.40q", text)
	}
	m := obj.members[0]
	return m.key, []byte(text[m.val.start-1 : m.val.end-1]), nil
}

// sameJSON reports whether a and b (JSON with comments allowed) hold the
// same value, however they are laid out.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(stripJSONC(a), &x) != nil || json.Unmarshal(stripJSONC(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// spliced is the text of v in data once sp is made (sp within v).
func spliced(data []byte, v *jvalue, sp splice) string {
	return string(data[v.start:sp.start]) + sp.text + string(data[sp.end:v.end])
}
