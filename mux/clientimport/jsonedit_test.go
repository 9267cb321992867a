package clientimport

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

var testEntry = map[string]any{"command": "/bin/mcp-mux", "args": []string{"-c", "/c.toml", "--profile", "p"}}

// rewrite removes the members named in remove from the object at path of
// data and puts testEntry in the first one's place.
func rewrite(t *testing.T, data string, remove []string, path ...string) string {
	t.Helper()
	root, err := scanJSONC([]byte(data))
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	obj := root.lookup(path...)
	set := map[string]bool{}
	for _, r := range remove {
		set[r] = true
	}
	sp, _, ok := replaceMembers([]byte(data), obj, set, "mcp-mux", testEntry)
	if !ok {
		return data
	}
	return string(applySplices([]byte(data), []splice{sp}))
}

// servers decodes the object at key of a JSONC file.
func servers(t *testing.T, data, key string) map[string]json.RawMessage {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(stripJSONC([]byte(data)), &top); err != nil {
		t.Fatalf("not JSON after the edit: %v\n%s", err, data)
	}
	var out map[string]json.RawMessage
	json.Unmarshal(top[key], &out)
	return out
}

func TestReplaceMembersKeepsCommentsTabsAndTrailingCommas(t *testing.T) {
	in := "{\n\t// my servers\n\t\"servers\": {\n\t\t/* the one I keep */\n\t\t\"keep\": {\"command\": \"k\"}, // mine\n\t\t\"a\": {\n\t\t\t\"command\": \"a\", // inside a\n\t\t},\n\t\t// about b\n\t\t\"b\": {\"command\": \"b\"}, /* after b */\n\t},\n\t\"inputs\": [],\n}\n"
	out := rewrite(t, in, []string{"a", "b"}, "servers")
	want := "{\n\t// my servers\n\t\"servers\": {\n\t\t/* the one I keep */\n\t\t\"keep\": {\"command\": \"k\"}, // mine\n\t\t\"mcp-mux\": {\n\t\t\t\"args\": [\n\t\t\t\t\"-c\",\n\t\t\t\t\"/c.toml\",\n\t\t\t\t\"--profile\",\n\t\t\t\t\"p\"\n\t\t\t],\n\t\t\t\"command\": \"/bin/mcp-mux\"\n\t\t},\n\t\t// about b\n\t},\n\t\"inputs\": [],\n}\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if got := servers(t, out, "servers"); len(got) != 2 || got["keep"] == nil || got["mcp-mux"] == nil {
		t.Errorf("servers after: %v", got)
	}
}

func TestReplaceMembersStrictJSONStaysStrict(t *testing.T) {
	in := `{
  "mcpServers": {
    "a": { "command": "a" },
    "keep": { "command": "k" },
    "b": { "command": "b" }
  },
  "globalShortcut": ""
}`
	out := rewrite(t, in, []string{"a", "b"}, "mcpServers")
	if !json.Valid([]byte(out)) {
		t.Fatalf("not strict JSON any more:\n%s", out)
	}
	if !strings.HasPrefix(out, "{\n  \"mcpServers\": {\n    \"mcp-mux\": {\n      \"args\"") || !strings.HasSuffix(out, "    \"keep\": { \"command\": \"k\" }\n  },\n  \"globalShortcut\": \"\"\n}") {
		t.Errorf("got\n%s", out)
	}
	// On one line too.
	out = rewrite(t, `{"mcpServers": {"a": 1, "keep": 2, "b": 3}, "x": true}`, []string{"a", "b"}, "mcpServers")
	if !json.Valid([]byte(out)) || !strings.Contains(out, `"keep": 2}, "x": true}`) {
		t.Errorf("one line: %s", out)
	}
	out = rewrite(t, `{"mcpServers": {"keep": 2, "a": 1}}`, []string{"a"}, "mcpServers")
	if !json.Valid([]byte(out)) {
		t.Errorf("last removed: %s", out)
	}
}

// TestReplaceMembersAgainChangesNothing: the entry written anew over
// itself is the same bytes, which is what makes a second --apply a no-op.
func TestReplaceMembersAgainChangesNothing(t *testing.T) {
	in := "{\n    \"mcpServers\": {\n        \"a\": {\"command\": \"a\"},\n        \"keep\": 1\n    }\n}\n"
	once := rewrite(t, in, []string{"a"}, "mcpServers")
	twice := rewrite(t, once, []string{"mcp-mux"}, "mcpServers")
	if once != twice {
		t.Errorf("second rewrite changed it:\n%s\n---\n%s", once, twice)
	}
	if !strings.Contains(once, "\n        \"mcp-mux\": {\n            \"args\"") {
		t.Errorf("not indented as its siblings (4 spaces):\n%s", once)
	}
}

func TestScanJSONCRefusesBrokenInput(t *testing.T) {
	for _, in := range []string{"", "[]", `{"a": }`, `{"a": 1`, `{"a" 1}`, `{"a": 1 "b": 2}`, `{"a": "x`, `{"a": tru}`, `{} x`,
		"{\"a\":" + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + "}"} {
		if _, err := scanJSONC([]byte(in)); err == nil {
			t.Errorf("%.40q: no error", in)
		}
	}
}

// FuzzReplaceMembers: whatever a file holds, the scanner does not crash,
// and an edit of what it accepts is still JSONC that the reader parses.
func FuzzReplaceMembers(f *testing.F) {
	f.Add("{\"mcpServers\": {\"a\": 1, /* c */ \"b\": [1, 2,], // x\n}}")
	f.Add(`{"mcpServers": {"a": {"command": "x", "args": ["\"]"]}}}`)
	f.Fuzz(func(t *testing.T, in string) {
		root, err := scanJSONC([]byte(in))
		if err != nil {
			return
		}
		obj := root.get("mcpServers")
		if obj == nil || obj.kind != '{' || len(obj.members) == 0 {
			return
		}
		sp, _, _ := replaceMembers([]byte(in), obj, map[string]bool{obj.members[0].key: true}, "mcp-mux", testEntry)
		out := applySplices([]byte(in), []splice{sp})
		if _, err := decodeObject("f", stripJSONC(out)); err != nil && json.Valid(stripJSONC([]byte(in))) {
			t.Errorf("%v\n%s\n->\n%s", err, in, out)
		}
	})
}

func TestAddPermissionRules(t *testing.T) {
	in := `{
  "permissions": {
    "allow": [
      "Bash(ls:*)",
      "mcp__mem__read"
    ],
    "deny": ["mcp__mem__delete"]
  },
  "model": "x"
}`
	carried := []CarriedRule{
		{PermissionRule{"allow", "mcp__mem__read"}, []string{"mcp__mcp-mux__mem__read"}},
		{PermissionRule{"deny", "mcp__mem__delete"}, []string{"mcp__mcp-mux__mem__delete", "mcp__mcp-mux__mem__delete"}},
	}
	out, added, _, err := AddPermissionRules("settings.json", []byte(in), carried)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "permissions": {
    "allow": [
      "Bash(ls:*)",
      "mcp__mem__read",
      "mcp__mcp-mux__mem__read"
    ],
    "deny": ["mcp__mem__delete", "mcp__mcp-mux__mem__delete"]
  },
  "model": "x"
}`
	if string(out) != want || len(added) != 2 {
		t.Errorf("got %v\n%s", added, out)
	}
	again, added, _, _ := AddPermissionRules("settings.json", out, carried)
	if !bytes.Equal(again, out) || len(added) != 0 {
		t.Errorf("second time added %v", added)
	}
}

func TestAddToConfigAddsProfilesOnce(t *testing.T) {
	cfg := []byte("[[backend]]\nname = \"a\"\ncommand = \"a\"\n\n[profile.cursor]\nbackends = [\"a\"] # mine\nclients = [\"cursor*\"]\n")
	ex, err := ReadExisting("c.toml", cfg)
	if err != nil {
		t.Fatal(err)
	}
	added := []byte("[[backend]]\nname = \"b\"\ncommand = \"b\"\n")
	profiles := []Profile{{Name: "cursor", Backends: []string{"b"}}, {Name: "vscode", About: "VS Code's", Backends: []string{"b"}, Clients: []string{"Visual Studio Code*"}}}
	out, said, err := AddToConfig(cfg, added, profiles, ex)
	if err != nil {
		t.Fatal(err)
	}
	want := "[[backend]]\nname = \"a\"\ncommand = \"a\"\n\n[profile.cursor]\nbackends = [\"a\", \"b\"] # mine\nclients = [\"cursor*\"]\n\n[[backend]]\nname = \"b\"\ncommand = \"b\"\n\n# VS Code's\n[profile.vscode]\nbackends = [\"b\"]\nclients = [\"Visual Studio Code*\"]\n"
	if string(out) != want || len(said) != 2 {
		t.Errorf("got %q\n%s", said, out)
	}
	var doc struct {
		Profile map[string]struct{ Backends, Clients []string }
	}
	if _, err := toml.Decode(string(out), &doc); err != nil || len(doc.Profile["vscode"].Backends) != 1 {
		t.Errorf("%v %+v", err, doc)
	}
	ex, _ = ReadExisting("c.toml", out)
	again, said, err := AddToConfig(out, nil, profiles, ex)
	if err != nil || !bytes.Equal(again, out) || len(said) != 0 {
		t.Errorf("second time: %v %q\n%s", err, said, again)
	}
	if _, err := ReadExisting("c.toml", []byte("[[backend]\n")); err == nil {
		t.Error("broken TOML read without error")
	}
}
