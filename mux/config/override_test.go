package config

import (
	"reflect"
	"strings"
	"testing"
)

// Tool overrides ([[backend.override]]): what the file may say, and the
// FILE:LINE of each mistake. What the agent sees of them is tested in
// mux/override_test.go.

func TestConfigOverridesAreDecoded(t *testing.T) {
	cfg, ps := parseString(t, `[[backend]]
name = "gh"
command = "go"

[[backend.override]]
tool = "create_issue"
name = "new_issue"
title = "New issue"
description = "Opens an issue."
annotations = { readOnlyHint = false, destructiveHint = true, title = "New" }

[[backend.override]]
tool = "search"
description = "Finds things."

[[backend]]
name = "other"
command = "go"
override = [{ tool = "x", name = "y" }]
`, noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	no, yes, title := false, true, "New"
	want := []ToolOverride{
		{Tool: "create_issue", Name: "new_issue", Title: "New issue", Description: "Opens an issue.",
			Annotations: &ToolHints{Title: &title, ReadOnlyHint: &no, DestructiveHint: &yes}},
		{Tool: "search", Description: "Finds things."},
	}
	gh := cfg.Backends[0]
	if !reflect.DeepEqual(gh.Overrides, want) {
		t.Errorf("gh overrides = %+v, want %+v", gh.Overrides, want)
	}
	if !reflect.DeepEqual(gh.OverrideLines, []int{5, 12}) {
		t.Errorf("gh override lines = %v, want [5 12]", gh.OverrideLines)
	}
	if got := gh.Shown("create_issue"); got != "new_issue" {
		t.Errorf("Shown(create_issue) = %q, want new_issue", got)
	}
	if got := gh.Shown("search"); got != "search" {
		t.Errorf("Shown(search) = %q, want search (no name: its own)", got)
	}
	other := cfg.Backends[1]
	if len(other.Overrides) != 1 || other.Overrides[0] != (ToolOverride{Tool: "x", Name: "y"}) || other.OverrideLines[0] != 19 {
		t.Errorf("inline override = %+v at %v", other.Overrides, other.OverrideLines)
	}
}

func TestConfigOverrideRules(t *testing.T) {
	ok := "[[backend]]\nname = \"gh\"\ncommand = \"go\"\n"
	ov := func(lines string) string { return "[[backend.override]]\n" + lines }
	tests := []struct {
		name string
		src  string
		want []wantProblem
	}{
		{"valid", ok + ov("tool = \"a\"\nname = \"b-2_c\"\n") + ov("tool = \"b\"\nname = \"a\"\n"), nil},
		{"no tool", ok + ov("name = \"x\"\n"), []wantProblem{
			{4, `backend #1 (gh).override #1: missing tool: every [[backend.override]] needs tool = "NAME"`},
		}},
		{"empty tool", ok + ov("tool = \"\"\n"), []wantProblem{
			{5, `backend #1 (gh).override #1.tool: must not be empty`},
		}},
		{"tool not a string", ok + ov("tool = 3\n"), []wantProblem{
			{5, `backend #1 (gh).override #1.tool: expected a string, got an integer`},
		}},
		{"the same tool twice", ok + ov("tool = \"a\"\n") + ov("tool = \"b\"\n") + ov("tool = \"a\"\ntitle = \"A\"\n"), []wantProblem{
			{9, `backend #1 (gh).override #3.tool: tool "a" is overridden already (override #1, line 4)`},
		}},
		{"invalid name", ok + ov("tool = \"a\"\nname = \"new issue\"\n"), []wantProblem{
			{6, `backend #1 (gh).override #1.name: invalid tool name "new issue": use only letters, digits, "_" and "-"`},
		}},
		{"empty name, title, description", ok + ov("tool = \"a\"\nname = \"\"\ntitle = \"\"\ndescription = \"\"\n"), []wantProblem{
			{6, `override #1.name: must not be empty (remove the key to keep the tool's own name)`},
			{7, `override #1.title: must not be empty`},
			{8, `override #1.description: must not be empty`},
		}},
		{"exposed name too long", ok + ov("tool = \"a\"\nname = \""+strings.Repeat("n", 61)+"\"\n"), []wantProblem{
			{6, `override #1.name: the agent would see "gh__nnnn`},
		}},
		{"two renamed to one name", ok + ov("tool = \"a\"\nname = \"c\"\n") + ov("tool = \"b\"\nname = \"c\"\n"), []wantProblem{
			{9, `backend #1 (gh).override #2.name: tool "a" of override #1 (line 4) is exposed as "c" already: two tools cannot share a name`},
		}},
		{"renamed to another override's own name", ok + ov("tool = \"a\"\ndescription = \"A\"\n") + ov("tool = \"b\"\nname = \"a\"\n"), []wantProblem{
			{9, `override #2.name: tool "a" of override #1 (line 4) is exposed as "a" already`},
		}},
		{"unknown key", ok + ov("tool = \"a\"\ndescripton = \"x\"\n"), []wantProblem{
			{6, `backend #1 (gh).override #1.descripton: unknown key; did you mean "description"?`},
		}},
		{"unknown annotation", ok + ov("tool = \"a\"\nannotations = { readOnlyHnt = true }\n"), []wantProblem{
			{6, `override #1.annotations.readOnlyHnt: unknown key; did you mean "readOnlyHint"?`},
		}},
		{"annotation of the wrong type", ok + ov("tool = \"a\"\nannotations = { destructiveHint = \"yes\" }\n"), []wantProblem{
			{6, `override #1.annotations.destructiveHint: expected true or false, got a string`},
		}},
		{"annotations in their own table", ok + ov("tool = \"a\"\n[backend.override.annotations]\nidempotentHint = 1\n"), []wantProblem{
			{7, `override #1.annotations.idempotentHint: expected true or false, got an integer`},
		}},
		{"a table, not an array of tables", ok + "[backend.override]\ntool = \"a\"\n", []wantProblem{
			{4, `backend #1 (gh).override: expected a list, got a table`},
		}},
		{"disabled backend: still checked", ok + "[[backend]]\nname = \"off\"\ncommand = \"x\"\ndisabled = true\n" + ov("name = \"x\"\n"), []wantProblem{
			{8, `backend #2 (off).override #1: missing tool`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseString(t, tt.src, noEnv)
			checkProblems(t, "test.toml", ps, tt.want)
		})
	}
}

// TestParseForServingBreaksTheBackendOfABadOverride: a mistake in an
// override is its backend's, which mux shows failed with it, FILE:LINE
// and all; the other backends serve.
func TestParseForServingBreaksTheBackendOfABadOverride(t *testing.T) {
	cfg, err := ParseForServing("test.toml", []byte("[[backend]]\nname = \"gh\"\ncommand = \"go\"\n[[backend.override]]\nname = \"x\"\n\n[[backend]]\nname = \"ok\"\ncommand = \"go\"\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Backends[0].Broken; b != `test.toml:4: backend #1 (gh).override #1: missing tool: every [[backend.override]] needs tool = "NAME", the backend's own name of the tool it changes` {
		t.Errorf("gh broken = %q", b)
	}
	if cfg.Backends[1].Broken != "" {
		t.Errorf("ok broken = %q", cfg.Backends[1].Broken)
	}
}

// An override written above the [[backend]] it is for is a TOML error on
// the later [[backend]] line (or, with no [[backend]] at all, a [backend]
// table): the message must point at the override and say where it goes.
func TestConfigOverrideBeforeItsBackend(t *testing.T) {
	const where = "[[backend.override]] comes before any [[backend]]: it belongs after the [[backend]] whose tool it overrides"
	for _, tt := range []struct {
		name string
		src  string
		want []wantProblem
	}{
		{"then a backend", "[mux]\nlog_level = \"info\"\n\n[[backend.override]]\ntool = \"search\"\nname = \"find\"\n\n[[backend]]\nname = \"gh\"\ncommand = \"go\"\n",
			[]wantProblem{{4, where}}},
		{"no backend at all", "# overrides only\n[[backend.override]]\ntool = \"search\"\n",
			[]wantProblem{{2, where}, {0, "no enabled [[backend]]"}}},
		{"a table of one", "[[backend.override]]\ntool = \"a\"\n[backend.env]\nA = \"b\"\n[[backend]]\nname = \"gh\"\ncommand = \"go\"\n",
			[]wantProblem{{1, where}}},
		{"env first", "[backend.env]\nA = \"b\"\n[[backend]]\nname = \"gh\"\ncommand = \"go\"\n",
			[]wantProblem{{1, "[backend.env] comes before any [[backend]]: it belongs after the [[backend]] it is for"}}},
		{"another syntax error stays", "[[backend.override]]\ntool = \"a\"\nx = [\n[[backend]]\nname = \"gh\"\n",
			[]wantProblem{{4, "TOML syntax error"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseString(t, tt.src, noEnv)
			checkProblems(t, "test.toml", ps, tt.want)
		})
	}
}
