package search

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// refParamText is paramText written with encoding/json: what the scanner
// must agree with.
func refParamText(schema []byte) (string, []string) {
	var root any
	if json.Unmarshal(schema, &root) != nil {
		return "", nil
	}
	var sb strings.Builder
	var names []string
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		m, ok := v.(map[string]any)
		if !ok || depth > 3 {
			return
		}
		if props, ok := m["properties"].(map[string]any); ok {
			keys := make([]string, 0, len(props))
			for k := range props {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if depth == 0 {
					names = append(names, k)
				}
				sb.WriteString(k + " ")
				pm, _ := props[k].(map[string]any)
				d, _ := pm["description"].(string)
				sb.WriteString(d + " ")
				walk(props[k], depth+1)
			}
		}
		walk(m["items"], depth+1)
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			alts, _ := m[k].([]any)
			for _, a := range alts {
				walk(a, depth+1)
			}
		}
	}
	walk(root, 0)
	return sb.String(), names
}

// TestParamTextCatalog: the scanner reads every schema of the real catalog
// as encoding/json does.
func TestParamTextCatalog(t *testing.T) {
	for _, d := range loadDocs(t) {
		text, names := paramText(d.InputSchema)
		wantText, wantNames := refParamText(d.InputSchema)
		if text != wantText || !slices.Equal(names, wantNames) {
			t.Errorf("%s: paramText differs from encoding/json's reading:\n%q %q\n%q %q", d.Name, text, names, wantText, wantNames)
		}
	}
}

func FuzzParamText(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"url":{"type":"string","description":"The \"page\" \u00e9"},"o":{"properties":{"d":{"description":"n"}}}}}`))
	f.Add([]byte(`{"properties":{"a":{"items":{"anyOf":[{"properties":{"b":{}}},true]}}},"$defs":{"x":{"properties":{"y":{}}}}}`))
	f.Add([]byte(`{"properties":{"a":[1,2,{"x":null}],"b":-1.5e3,"c":{"description":7}}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"properties":{"a":{"description":"x"`))
	f.Fuzz(func(t *testing.T, schema []byte) {
		text, names := paramText(schema)
		if !json.Valid(schema) {
			return // anything, without panicking
		}
		var obj map[string]any
		if json.Unmarshal(schema, &obj) != nil {
			return
		}
		// Duplicate keys: encoding/json keeps the last, the scanner all.
		if strings.Count(string(schema), `"properties"`) > 1 || hasDuplicateKeys(schema) {
			return
		}
		wantText, wantNames := refParamText(schema)
		if text != wantText || !slices.Equal(names, wantNames) {
			t.Errorf("paramText(%s) = %q %q, encoding/json's reading %q %q", schema, text, names, wantText, wantNames)
		}
	})
}

// hasDuplicateKeys reports whether some object of the JSON has a key twice.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // next string token is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := len(stack) - 1
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top >= 0 && stack[top].object {
					stack[top].key = true
				}
				stack = append(stack, frame{keys: map[string]bool{}, object: v == '{', key: v == '{'})
			default:
				stack = stack[:top]
				continue
			}
		case string:
			if top >= 0 && stack[top].object && stack[top].key {
				if stack[top].keys[v] {
					return true
				}
				stack[top].keys[v] = true
				stack[top].key = false
				continue
			}
			if top >= 0 && stack[top].object {
				stack[top].key = true
			}
		default:
			if top >= 0 && stack[top].object {
				stack[top].key = true
			}
		}
	}
}
