package config

import (
	"reflect"
	"testing"
)

// Filters (tools, exclude_tools, prompts, exclude_prompts) and the names
// the agent ends up with: config rules first, then what a client sees.

func TestConfigFilterKeysAreDecoded(t *testing.T) {
	cfg, ps := parseString(t, `[[backend]]
name = "gh"
command = "go"
tools = ["search_*", "get_issue"]
exclude_tools = ["*_admin"]
prompts = []
exclude_prompts = ["draft?", "[a-c]*"]
`, noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	s := cfg.Backends[0]
	if !reflect.DeepEqual(s.Tools, []string{"search_*", "get_issue"}) || !reflect.DeepEqual(s.ExcludeTools, []string{"*_admin"}) ||
		s.Prompts == nil || len(s.Prompts) != 0 || !reflect.DeepEqual(s.ExcludePrompts, []string{"draft?", "[a-c]*"}) {
		t.Errorf("filters: tools %q, exclude_tools %q, prompts %#v, exclude_prompts %q", s.Tools, s.ExcludeTools, s.Prompts, s.ExcludePrompts)
	}
}

func TestConfigFilterRules(t *testing.T) {
	ok := "[[backend]]\nname = \"ok\"\ncommand = \"go\"\n"
	tests := []struct {
		name string
		src  string
		want []wantProblem
	}{
		{"valid globs", ok + "tools = [\"a*\", \"b?c\", \"[xy]z\", \"[^q]\", \"\\\\*lit\"]\nexclude_prompts = [\"*\"]\n", nil},
		{"unclosed class", ok + "tools = [\"echo\", \"[abc\"]\n", []wantProblem{
			{4, `backend #1 (ok).tools #2: invalid glob pattern "[abc"`},
		}},
		{"trailing backslash, each key", ok + "exclude_tools = [\"x\\\\\"]\nprompts = [\"[]\"]\nexclude_prompts = [\"a-[z-a\"]\n", []wantProblem{
			{4, `backend #1 (ok).exclude_tools #1: invalid glob pattern "x\\"`},
			{5, `backend #1 (ok).prompts #1: invalid glob pattern "[]"`},
			{6, `backend #1 (ok).exclude_prompts #1: invalid glob pattern "a-[z-a"`},
		}},
		{"pattern on its own line", ok + "tools = [\n  \"good\",\n  \"bad[\",\n]\n", []wantProblem{
			{6, `backend #1 (ok).tools #2: invalid glob pattern "bad["`},
		}},
		{"empty pattern", ok + "tools = [\"\"]\n", []wantProblem{{4, `backend #1 (ok).tools #1: empty pattern`}}},
		{"a string, not a list", ok + "tools = \"echo\"\n", []wantProblem{{4, `backend #1 (ok).tools: expected a list of strings, such as ["a", "b"], got a string`}}},
		{"disabled backend: globs still checked", ok + "[[backend]]\nname = \"off\"\ncommand = \"x\"\ndisabled = true\nprompts = [\"[\"]\n", []wantProblem{
			{8, `backend #2 (off).prompts #1: invalid glob pattern "["`},
		}},
		{"did you mean", ok + "exclude_tool = [\"x\"]\n", []wantProblem{{4, `unknown key; did you mean "exclude_tools"?`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseString(t, tt.src, noEnv)
			checkProblems(t, "test.toml", ps, tt.want)
		})
	}
}

func TestConfigSameEffectivePrefixIsAnError(t *testing.T) {
	b := func(name, extra string) string {
		return "[[backend]]\nname = \"" + name + "\"\ncommand = \"go\"\n" + extra
	}
	tests := []struct {
		name string
		src  string
		want []wantProblem
	}{
		{"prefix equals another's name", b("github", "") + b("gh2", "prefix = \"github\"\n"), []wantProblem{
			{7, `backend #2 (gh2).prefix: prefix "github" is already the prefix of backend "github" (backend #1, line 2): give one of them another prefix`},
		}},
		{"two equal prefixes", b("a", "prefix = \"x\"\n") + b("b", "") + b("c", "prefix = \"x\"\n"), []wantProblem{
			{11, `backend #3 (c).prefix: prefix "x" is already the prefix of backend "a" (backend #1, line 4)`},
		}},
		{"three with one prefix: each later one named", b("a", "prefix = \"x\"\n") + b("b", "prefix = \"x\"\n") + b("c", "prefix = \"x\"\n"), []wantProblem{
			{8, `backend #2 (b).prefix: prefix "x" is already the prefix of backend "a"`},
			{12, `backend #3 (c).prefix: prefix "x" is already the prefix of backend "a"`},
		}},
		{"a name that is another's prefix", b("a", "prefix = \"b\"\n") + b("b", ""), []wantProblem{
			{6, `backend #2 (b).name: prefix "b" is already the prefix of backend "a" (backend #1, line 4)`},
		}},
		{"two unprefixed are fine", b("a", "prefix = \"\"\n") + b("b", "prefix = \"\"\n"), nil},
		{"a disabled one does not count", b("a", "prefix = \"x\"\n") + b("b", "prefix = \"x\"\ndisabled = true\n"), nil},
		{"different prefixes", b("a", "") + b("b", "prefix = \"a_\"\n"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseString(t, tt.src, noEnv)
			checkProblems(t, "test.toml", ps, tt.want)
		})
	}
}
