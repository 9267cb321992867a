package clientimport

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// TestImportCarriesClaudeCodePermissionRulesOver: the rules of Claude
// Code's settings for the imported servers become the names of their tools
// through mcp-mux (mcp__mcp-mux__BACKEND__TOOL); a whole server becomes a
// glob on its backend's prefix; a project's rule means the project's server
// of that name if it has one; rules for other servers, with a parenthesized
// specifier or a glob for the server are left out.
func TestImportCarriesClaudeCodePermissionRulesOver(t *testing.T) {
	exe, _ := os.Executable()
	home, proj, other := t.TempDir(), t.TempDir(), t.TempDir()
	srv := func(arg string) map[string]any { return map[string]any{"command": exe, "args": []string{arg}} }
	data, _ := json.Marshal(map[string]any{
		"mcpServers": map[string]any{"mem": srv("mem"), "My Tasks": srv("tasks"), "gh": srv("gh"), "broken": map[string]any{"command": "a | b"}},
		"projects": map[string]any{
			proj:  map[string]any{"mcpServers": map[string]any{"mem": srv("project-mem")}},
			other: map[string]any{"mcpServers": map[string]any{"gh2": srv("gh")}}, // the same as gh: imported once
		},
	})
	path := filepath.Join(home, ".claude.json")
	f, err := Read(path, data, Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	desktop, err := Read(filepath.Join(home, "claude_desktop_config.json"), []byte(`{"mcpServers": {"desk": {"command": "x"}}}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := Render([]*File{desktop, f})
	servers := ClaudeCodeServers(res)
	// In the order of the backends (JSON objects' keys are sorted here).
	want := []ClaudeCodeServer{{"My Tasks", "", "My-Tasks", ""}, {"gh", "", "gh", ""}, {"gh2", other, "gh", ""}, {"mem", "", "mem", ""}, {"mem", proj, "mem-2", ""}}
	if !reflect.DeepEqual(servers, want) {
		t.Fatalf("servers %+v\nwant %+v", servers, want)
	}

	settings := []byte(`{
  // comments are tolerated
  "permissions": {
    "allow": ["mcp__mem__create_entities", "mcp__My_Tasks", "mcp__gh__get_*", "Bash(npm test)", "mcp__desk__x"],
    "deny": ["mcp__gh__delete_repo", "mcp__*", "mcp__mem__x(arg)", "mcp__memory__x", "mcp__broken__x"],
    "ask": ["mcp__gh2__*", 5],
    "defaultMode": "default"
  }
}`)
	rules, err := ReadPermissionRules("settings.json", settings)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 10 {
		t.Fatalf("rules %q", rules)
	}
	type carried struct {
		list, rule string
		new        []string
	}
	flat := func(cs []CarriedRule) []carried {
		var out []carried
		for _, c := range cs {
			out = append(out, carried{c.List, c.Rule, c.New})
		}
		return out
	}
	user := []carried{
		{"allow", "mcp__mem__create_entities", []string{"mcp__mcp-mux__mem__create_entities", "mcp__mcp-mux__mem-2__create_entities"}},
		{"allow", "mcp__My_Tasks", []string{"mcp__mcp-mux__My-Tasks__*"}},
		{"allow", "mcp__gh__get_*", []string{"mcp__mcp-mux__gh__get_*"}},
		{"ask", "mcp__gh2__*", []string{"mcp__mcp-mux__gh__*"}},
		{"deny", "mcp__gh__delete_repo", []string{"mcp__mcp-mux__gh__delete_repo"}},
	}
	if got := flat(CarryOver(rules, "", servers, "mcp-mux")); !reflect.DeepEqual(got, user) {
		t.Errorf("user's rules:\n got %q\nwant %q", got, user)
	}
	// In the project, "mem" is the project's.
	if got := flat(CarryOver(rules[:1], proj, servers, "mcp-mux")); !reflect.DeepEqual(got, []carried{{"allow", "mcp__mem__create_entities", []string{"mcp__mcp-mux__mem-2__create_entities"}}}) {
		t.Errorf("project's rule: %q", got)
	}
	if got := flat(CarryOver(rules[:1], other, servers, "mcp-mux")); !reflect.DeepEqual(got, []carried{{"allow", "mcp__mem__create_entities", []string{"mcp__mcp-mux__mem__create_entities"}}}) {
		t.Errorf("another project's rule: %q", got)
	}
	// A project's servers served by an entry of their own, as --apply
	// registers them in Claude Code: its rules name that entry.
	own := slices.Clone(servers)
	own[4].Mux = "mcp-mux-proj"
	if got := flat(CarryOver(rules[:1], "", own, "mcp-mux")); !reflect.DeepEqual(got, []carried{{"allow", "mcp__mem__create_entities", []string{"mcp__mcp-mux__mem__create_entities", "mcp__mcp-mux-proj__mem-2__create_entities"}}}) {
		t.Errorf("user's rule, the project's server on its own entry: %q", got)
	}
	if got := flat(CarryOver(rules[:1], proj, own, "mcp-mux")); !reflect.DeepEqual(got, []carried{{"allow", "mcp__mem__create_entities", []string{"mcp__mcp-mux-proj__mem-2__create_entities"}}}) {
		t.Errorf("project's rule, its server on its own entry: %q", got)
	}

	if got := ClaudeCodeSettings(home, []*File{desktop, f}, "/cwd"); !reflect.DeepEqual(got, []string{
		filepath.Join(home, ".claude", "settings.json"),
		filepath.Join("/cwd", ".claude", "settings.json"), filepath.Join("/cwd", ".claude", "settings.local.json"),
		filepath.Join(proj, ".claude", "settings.json"), filepath.Join(proj, ".claude", "settings.local.json"),
		filepath.Join(other, ".claude", "settings.json"), filepath.Join(other, ".claude", "settings.local.json"),
	}) {
		t.Errorf("settings files %q", got)
	}
	if p := SettingsProject(filepath.Join(proj, ".claude", "settings.local.json"), home); p != proj {
		t.Errorf("project of a project's settings: %q", p)
	}
	if p := SettingsProject(filepath.Join(home, ".claude", "settings.json"), home); p != "" {
		t.Errorf("project of the user's settings: %q", p)
	}
	if _, err := ReadPermissionRules("bad.json", []byte(`{"permissions": [`)); err == nil {
		t.Error("no error for a broken file")
	}
}
