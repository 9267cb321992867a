package clientimport

import (
	"strings"
	"testing"
)

// TestUndoTakesBackOnlyWhatApplyChanged: Undo of RewriteServers' changes
// on the file as it is later gives the file as it was, with every change
// made since outside mcp-mux's entry kept (other keys, a server added, the
// whole file laid out anew), and refuses, changing nothing, when mcp-mux's
// entry itself was changed or removed, or a server it took out is back,
// different.
func TestUndoTakesBackOnlyWhatApplyChanged(t *testing.T) {
	orig := `{
  "numStartups": 1,
  "mcpServers": {
    "a": {"command": "a", "args": ["-x"]}, // mine
    "b": {"command": "b"},
    "c": {"command": "c"}
  }
}
`
	f := &File{Path: "c.json", Client: ClientCursor}
	entry := map[string]any{"command": "/bin/mcp-mux", "args": []string{"--profile", "cursor"}}
	applied, changes, err := RewriteServers(f, []byte(orig), map[string]ServersEdit{"": {Name: "mcp-mux", Remove: []string{"a", "c"}, Entry: entry}})
	if err != nil || len(changes) != 1 {
		t.Fatalf("%v %+v", err, changes)
	}
	undo := func(now string) (string, error) {
		out, err := Undo("c.json", []byte(now), changes[0])
		return string(out), err
	}
	ok := []struct{ name, now, want string }{
		{"as written", string(applied), orig},
		{"another key changed", strings.Replace(string(applied), `"numStartups": 1`, `"numStartups": 2`, 1),
			strings.Replace(orig, `"numStartups": 1`, `"numStartups": 2`, 1)},
		// The comment after the entry stays after the servers put back.
		{"a server added", strings.Replace(string(applied), `"b": {"command": "b"}`, `"b": {"command": "b"},
    "d": {"command": "d"}`, 1), `{
  "numStartups": 1,
  "mcpServers": {
    "a": {"command": "a", "args": ["-x"]},
    "c": {"command": "c"}, // mine
    "b": {"command": "b"},
    "d": {"command": "d"}
  }
}
`},
		{"laid out anew, c put back by hand", `{"numStartups": 1, "mcpServers": {"mcp-mux": {"args": ["--profile", "cursor"], "command": "/bin/mcp-mux"}, "c": {"command": "c"}, "b": {"command": "b"}}}`,
			`{"numStartups": 1, "mcpServers": {"a": {"command": "a", "args": ["-x"]}, "c": {"command": "c"}, "b": {"command": "b"}}}`},
	}
	for _, c := range ok {
		if got, err := undo(c.now); err != nil || got != c.want {
			t.Errorf("%s: %v\n%s\nwant\n%s", c.name, err, got, c.want)
		}
	}
	for name, now := range map[string]string{
		"the entry changed": strings.Replace(string(applied), `"cursor"`, `"other"`, 1),
		"the entry removed": `{"mcpServers": {"b": {"command": "b"}}}`,
		"c back, different": strings.Replace(string(applied), `"b": {"command": "b"}`, `"b": {"command": "b"}, "c": {"command": "c2"}`, 1),
		"the servers gone":  `{"numStartups": 1}`,
		"not JSON":          `{"mcpServers": `,
	} {
		if got, err := undo(now); err == nil {
			t.Errorf("%s: no error, got\n%s", name, got)
		}
	}
}

// TestUndoTakesBackTheRulesApplyAdded: the rules AddPermissionRules added
// are taken out of their lists again, the rules added since kept, a rule
// removed since not missed.
func TestUndoTakesBackTheRulesApplyAdded(t *testing.T) {
	orig := `{
  "permissions": {
    "allow": [
      "mcp__a__x"
    ]
  }
}
`
	carried := []CarriedRule{{PermissionRule: PermissionRule{List: "allow", Rule: "mcp__a__x"}, New: []string{"mcp__mcp-mux__a__x", "mcp__mcp-mux__b__x"}}}
	applied, _, changes, err := AddPermissionRules("s.json", []byte(orig), carried)
	if err != nil || len(changes) != 1 {
		t.Fatalf("%v %+v", err, changes)
	}
	for _, c := range []struct{ name, now, want string }{
		{"as written", string(applied), orig},
		{"a rule added since", strings.Replace(string(applied), `"mcp__mcp-mux__b__x"`, `"mcp__mcp-mux__b__x",
      "mcp__mine"`, 1), strings.Replace(orig, `"mcp__a__x"`, `"mcp__a__x",
      "mcp__mine"`, 1)},
		{"one removed since", strings.Replace(string(applied), `,
      "mcp__mcp-mux__a__x"`, "", 1), orig},
		{"the list gone", `{"permissions": {}}`, `{"permissions": {}}`},
	} {
		got, err := Undo("s.json", []byte(c.now), changes[0])
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %v\n%s\nwant\n%s", c.name, err, got, c.want)
		}
	}
}
