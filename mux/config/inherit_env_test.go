package config

import (
	"reflect"
	"testing"
)

func TestConfigInheritEnv(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  []string
	}{
		{`true`, []string{"*"}},
		{`false`, nil},
		{`[]`, []string{}},
		{`["GITHUB_TOKEN", "AWS_*"]`, []string{"GITHUB_TOKEN", "AWS_*"}},
		{`["*"]`, []string{"*"}},
	} {
		cfg, ps := parseString(t, "[[backend]]\nname = \"b\"\ncommand = \"go\"\ninherit_env = "+tt.value+"\n", noEnv)
		if ps != nil {
			t.Errorf("inherit_env = %s: unexpected problems:%s", tt.value, problemStrings(ps))
			continue
		}
		if got := cfg.Backends[0].InheritEnv; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("inherit_env = %s: InheritEnv = %#v, want %#v", tt.value, got, tt.want)
		}
	}
}

func TestConfigInheritEnvMistakesNameTheLine(t *testing.T) {
	_, ps := parseString(t, `
[[backend]]
name = "str"
command = "go"
inherit_env = "GITHUB_TOKEN"

[[backend]]
name = "num"
command = "go"
inherit_env = 1

[[backend]]
name = "elems"
command = "go"
inherit_env = [
  "OK_NAME",
  2,
  "A=B",
  "",
  "*AWS",
  "A*B",
  "GOOD_*",
]
`, noEnv)
	checkProblems(t, "test.toml", ps, []wantProblem{
		{5, `backend #1 (str).inherit_env: expected true, false or a list of variable names, such as ["GITHUB_TOKEN", "AWS_*"], got a string`},
		{10, `backend #2 (num).inherit_env: expected true, false or a list of variable names, such as ["GITHUB_TOKEN", "AWS_*"], got an integer`},
		{17, `backend #3 (elems).inherit_env #2: expected a string, got an integer`},
		{18, `backend #3 (elems).inherit_env #3: invalid variable name "A=B"`},
		{19, `backend #3 (elems).inherit_env #4: invalid variable name ""`},
		{20, `backend #3 (elems).inherit_env #5: invalid variable name "*AWS"`},
		{21, `backend #3 (elems).inherit_env #6: invalid variable name "A*B"`},
	})
}
