package config

import (
	"reflect"
	"strings"
	"testing"
)

// Profiles: what [profile.NAME] decodes to, the mistakes reported at
// FILE:LINE, and the matching rules mux applies per session.

const twoBackends = "[[backend]]\nname = \"github\"\ncommand = \"go\"\n[[backend]]\nname = \"fs\"\ncommand = \"go\"\n"

func TestProfileDecoded(t *testing.T) {
	cfg, ps := parseString(t, twoBackends+`
[profile.cursor]
backends = ["github", "fs"]
tools = ["github__*issue*", "fs__read*"]
exclude_tools = ["*__delete_*"]
tool_list = "search"
tool_list_max = 10
clients = ["cursor*"]

[profile.ro]
backends = ["fs"]
`, noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	if got := cfg.ProfileNames(); !reflect.DeepEqual(got, []string{"cursor", "ro"}) {
		t.Fatalf("profiles %q, want cursor, ro in file order", got)
	}
	c, _ := cfg.Profile("cursor")
	want := Profile{Name: "cursor", Backends: []string{"github", "fs"}, Tools: []string{"github__*issue*", "fs__read*"},
		ExcludeTools: []string{"*__delete_*"}, ToolList: "search", ToolListMax: 10, Clients: []string{"cursor*"}, Line: 8,
		PatternLines: map[string][]int{"tools": {10, 10}, "exclude_tools": {11}}}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("cursor = %+v\nwant %+v", *c, want)
	}
	if !c.HasTool("github", "github__list_issues") || c.HasTool("github", "github__delete_issue") || c.HasTool("github", "github__get_repo") {
		t.Errorf("cursor's tool globs: list_issues in, delete_issue (excluded) and get_repo (not allowed) out")
	}
	ro, _ := cfg.Profile("ro")
	if ro.HasBackend("github") || !ro.HasBackend("fs") || !ro.HasTool("fs", "fs__anything") {
		t.Errorf("ro: only fs, all of its tools")
	}
	if p, ok := cfg.ProfileForClient("Cursor-Nightly"); !ok || p.Name != "cursor" {
		t.Errorf("clientInfo \"Cursor-Nightly\" should get cursor (case-insensitive glob)")
	}
	if _, ok := cfg.ProfileForClient("claude-code"); ok {
		t.Errorf("claude-code matches no profile")
	}
}

func TestProfileMistakes(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []wantProblem
	}{
		{"unknown backend", "[profile.p]\nbackends = [\"github\", \"gihtub\", \"nope\"]\n", []wantProblem{
			{8, `profile.p.backends #2: unknown backend "gihtub"; did you mean "github"?`},
			{8, `profile.p.backends #3: unknown backend "nope"; the backends are: github, fs`},
		}},
		{"bad glob", "[profile.p]\ntools = [\"ok*\", \"[x\"]\nclients = [\"\"]\n", []wantProblem{
			{8, `profile.p.tools #2: invalid glob pattern "[x"`},
			{9, `profile.p.clients #1: empty pattern`},
		}},
		{"bad name", "[profile.\"my view\"]\nbackends = [\"fs\"]\n", []wantProblem{
			{7, `profile."my view": invalid profile name "my view"`},
		}},
		{"a dot in the name", "[profile.Bad.Name]\nbackends = [\"fs\"]\n", []wantProblem{
			{7, `profile.Bad.Name: unknown key: [profile.Bad.Name] is the table "Name" inside the profile "Bad", and a profile's name cannot hold a dot; name it with letters, digits, "_" and "-" only (e.g. [profile.Bad-Name])`},
		}},
		{"array of tables", "[[profile]]\nname = \"p\"\n", []wantProblem{
			{7, `profile: write [profile.NAME] for each profile, not [[profile]]`},
		}},
		{"not a table", "[profile]\np = 3\n", []wantProblem{
			{8, `profile.p: expected a table: write [profile.p]`},
		}},
		{"a [mux] key that is not per agent", "[profile.p]\nlog_level = \"debug\"\n", []wantProblem{
			{8, `profile.p.log_level: unknown key; "log_level" is not decided per agent: set it in [mux] (a profile may set tool_list, tool_list_max)`},
		}},
		{"tool_list", "[profile.p]\ntool_list = \"some\"\ntool_list_max = -1\n", []wantProblem{
			{8, `profile.p.tool_list: must be "all"`},
			{9, `profile.p.tool_list_max: must not be negative`},
		}},
		{"typo", "[profile.p]\nbackend = [\"fs\"]\n", []wantProblem{
			{8, `profile.p.backend: unknown key; did you mean "backends"?`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseString(t, twoBackends+tt.src, noEnv)
			checkProblems(t, "test.toml", ps, tt.want)
		})
	}
}

func TestProfileClientsOverlapIsAWarning(t *testing.T) {
	cfg, ps := parseString(t, twoBackends+`[profile.a]
clients = ["cursor*"]
[profile.b]
clients = ["vscode", "Cursor-Nightly"]
[profile.c]
clients = ["CURSOR*"]
`, noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	checkProblems(t, "test.toml", cfg.Warnings, []wantProblem{
		{10, `profile.b.clients #2: clients pattern "Cursor-Nightly" overlaps "cursor*" of profile "a" (line 7)`},
		{12, `profile.c.clients #1: clients pattern "CURSOR*" overlaps "cursor*" of profile "a" (line 7)`},
	})
}

// A profile that cannot be read as written shows nothing when serving,
// never more than was meant; one naming a backend the file lacks keeps
// the others.
func TestProfileBrokenWhenServing(t *testing.T) {
	cfg, err := ParseForServing("test.toml", []byte(twoBackends+`[profile.bad]
backends = "fs"
[profile.typo]
backends = ["fs", "gone"]
[profile.fine]
backends = ["github"]
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := cfg.Profile("bad")
	if bad.Broken == "" || bad.HasBackend("fs") || bad.HasBackend("github") {
		t.Errorf("bad: want broken with no backends, got %+v", *bad)
	}
	if !strings.Contains(bad.Broken, "test.toml:8: profile.bad.backends: expected a list") {
		t.Errorf("bad.Broken = %q", bad.Broken)
	}
	typo, _ := cfg.Profile("typo")
	if typo.Broken != "" || !typo.HasBackend("fs") || typo.HasBackend("github") {
		t.Errorf("typo: want fs only, got %+v", *typo)
	}
	if fine, _ := cfg.Profile("fine"); fine.Broken != "" || !fine.HasBackend("github") {
		t.Errorf("fine: want github, got %+v", *fine)
	}
	if len(cfg.Warnings) != 2 {
		t.Errorf("want the 2 mistakes as warnings, got:%s", problemStrings(cfg.Warnings))
	}
}
