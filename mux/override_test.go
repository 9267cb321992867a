package mux

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Tool overrides ([[backend.override]]) as an agent sees them: the lists
// of both eras, calls by every path, search_tools, the wrappers, reloads
// and check --connect. The config rules are tested in
// config/override_test.go, the change of one tool in override/.

// overridden is the fixture fx with its rich tool: echo renamed say, and
// rich (readOnlyHint, destructiveHint false, idempotentHint, openWorldHint,
// annotations' title "Rich") renamed deep, with a title and a description
// of its own, and made destructive.
func overridden(t *testing.T) config.Backend {
	t.Helper()
	fx := fixture(t, "fx", "-rich")
	yes, no := true, false
	fx.Overrides = []config.ToolOverride{
		{Tool: "echo", Name: "say"},
		{Tool: "rich", Name: "deep", Title: "Deep thought", Description: "Answers with zanzibar precision.",
			Annotations: &config.ToolHints{ReadOnlyHint: &no, DestructiveHint: &yes}},
	}
	return fx
}

func TestOverrideIsWhatTheAgentListsInEveryEra(t *testing.T) {
	m := startMux(t, overridden(t))
	for _, version := range []string{legacyEra, modernEra} {
		t.Run(version, func(t *testing.T) {
			tools := listedTools(t, connectAt(t, m, nil, version))
			for _, gone := range []string{"fx__echo", "fx__rich"} {
				if tools[gone] != nil {
					t.Errorf("%s is listed under the name an override replaced", gone)
				}
			}
			if tools["fx__say"] == nil || tools["fx__say"].Description != "echoes its arguments as JSON text" {
				t.Errorf("fx__say = %+v, want echo under its new name, with its own description", tools["fx__say"])
			}
			deep := tools["fx__deep"]
			if deep == nil {
				t.Fatalf("fx__deep not listed: %v", keys(tools))
			}
			if deep.Title != "Deep thought" || deep.Description != "Answers with zanzibar precision." {
				t.Errorf("fx__deep title %q, description %q: want the override's", deep.Title, deep.Description)
			}
			a := deep.Annotations
			if a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
				t.Fatalf("fx__deep annotations %+v: want readOnlyHint false, destructiveHint true (the override's)", a)
			}
			if !a.IdempotentHint || a.OpenWorldHint == nil || !*a.OpenWorldHint || a.Title != "Rich" {
				t.Errorf("fx__deep annotations %+v: want the backend's idempotentHint, openWorldHint and title kept", a)
			}
			// What the override does not touch reaches the agent as the
			// backend sent it.
			if len(deep.Icons) != 1 || deep.Meta["fixture/rich"] == nil || deep.OutputSchema == nil || deep.InputSchema == nil {
				t.Errorf("fx__deep lost the backend's fields: icons %v, _meta %v, outputSchema %v", deep.Icons, deep.Meta, deep.OutputSchema)
			}
		})
	}
}

// A call of the new name reaches the backend under the tool's own name,
// by every path: the stdio pass-through and the HTTP fast path, in both
// eras (the go-sdk's path is the wrappers', below). The replaced name is
// unknown, as a name that never existed is.
func TestOverriddenNameIsCalledAndTheOldOneIsUnknown(t *testing.T) {
	m := startMux(t, overridden(t))
	type agent struct {
		name string
		cs   *mcp.ClientSession
		log  *wireLog
	}
	var agents []agent
	for _, version := range []string{legacyEra, modernEra} {
		agents = append(agents, agent{"stdio " + version, connectAt(t, m, nil, version), nil})
		cs, log := httpAgentAt(t, m, nil, version)
		agents = append(agents, agent{"http " + version, cs, log})
	}
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			if got := callText(t, a.cs, "fx__say", map[string]any{"text": "hi"}); got != `{"text":"hi"}` {
				t.Errorf("fx__say = %q, want the echo of its arguments", got)
			}
			if got := callText(t, a.cs, "fx__deep", map[string]any{"q": "x"}); !strings.Contains(got, "42") {
				t.Errorf("fx__deep = %q, want rich's answer", got)
			}
			if a.log != nil {
				fastOnly(t, a.log) // (an unknown name's error is the go-sdk's to give)
			}
			for _, old := range []string{"fx__echo", "fx__rich"} {
				_, err := a.cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: old, Arguments: map[string]any{}})
				wantUnknown(t, err, "tool", old)
			}
		})
	}
}

// An override that makes a read-only tool destructive makes
// call_read_only_tool refuse it, before it reaches the backend: an
// approval of the read-only wrapper must not run what the user marked
// destructive. call_tool (the go-sdk's path) runs it, by its new name.
func TestReadOnlyWrapperRefusesAToolAnOverrideMadeDestructive(t *testing.T) {
	cfg := testConfig(overridden(t))
	cfg.Mux.ToolList = config.ToolListSearch
	cs := agentNamed(t, startMuxConfig(t, cfg), "claude-ai", nil) // does not list again: offered the wrappers
	if tools := listedTools(t, cs); tools[toolCallReadOnly] == nil {
		t.Fatalf("no %s listed: %v", toolCallReadOnly, keys(tools))
	}
	before := fixtureStats(t, cs, "fx__stats").Requests
	res := wrapped(t, cs, toolCallReadOnly, "fx__deep", map[string]any{"q": "x"})
	if !res.IsError || strings.Contains(resultText(res), "42") || !strings.Contains(resultText(res), "readOnlyHint") {
		t.Errorf("call_read_only_tool fx__deep: %v %q, want it refused", res.IsError, resultText(res))
	}
	// (fixtureStats itself is one call through the backend.)
	if after := fixtureStats(t, cs, "fx__stats").Requests; after != before+1 {
		t.Errorf("the backend got %d requests between two stats calls: the refused call reached it", after-before-1)
	}
	if res := wrapped(t, cs, toolCall, "fx__deep", map[string]any{"q": "x"}); res.IsError || !strings.Contains(resultText(res), "42") {
		t.Errorf("call_tool fx__deep: %v %q, want rich's answer", res.IsError, resultText(res))
	}
	if res := wrapped(t, cs, toolCall, "fx__say", map[string]any{"text": "sdk path"}); !echoed(res, "sdk path") {
		t.Errorf("call_tool fx__say: %v %q", res.IsError, resultText(res))
	}

	// The same tool without the override is run by the read-only wrapper:
	// the refusal above is the override's doing.
	plain := testConfig(fixture(t, "fx", "-rich"))
	plain.Mux.ToolList = config.ToolListSearch
	pcs := agentNamed(t, startMuxConfig(t, plain), "claude-ai", nil)
	listedTools(t, pcs)
	if res := wrapped(t, pcs, toolCallReadOnly, "fx__rich", map[string]any{"q": "x"}); res.IsError || !strings.Contains(resultText(res), "42") {
		t.Errorf("call_read_only_tool fx__rich without an override: %v %q", res.IsError, resultText(res))
	}
}

// search_tools searches the overridden text: a word only the override's
// description has finds the tool, under its new name; the replaced name
// is not found.
func TestSearchFindsAToolByItsOverriddenText(t *testing.T) {
	cfg := testConfig(overridden(t), fixture(t, "other", "-rich"))
	cfg.Mux.ToolList = config.ToolListSearch
	cs := agentNamed(t, startMuxConfig(t, cfg), "claude-ai", nil)
	found, res := searchFor(t, cs, map[string]any{"query": "zanzibar"})
	if len(found) == 0 || found[0] != "fx__deep" {
		t.Fatalf("search for a word of the override's description found %v (%q), want fx__deep first", found, resultText(res))
	}
	if slices.Contains(found, "other__rich") {
		t.Errorf("search found other__rich, whose description does not have the word: %v", found)
	}
	found, _ = searchFor(t, cs, map[string]any{"query": "deep thought"})
	if len(found) == 0 || found[0] != "fx__deep" {
		t.Errorf("search for the override's title found %v, want fx__deep first", found)
	}
	// The name the override replaced is not searched: other's rich tool
	// has it, fx's has not any more.
	found, _ = searchFor(t, cs, map[string]any{"query": "rich", "limit": 20})
	if !slices.Contains(found, "other__rich") || slices.Contains(found, "fx__deep") {
		t.Errorf("search for the replaced name found %v: want other__rich, not fx__deep", found)
	}
	found, _ = searchFor(t, cs, map[string]any{"query": "echoes arguments", "limit": 20})
	if !slices.Contains(found, "fx__say") || slices.Contains(found, "fx__echo") {
		t.Errorf("search for echo's description found %v: want fx__say, never fx__echo", found)
	}
}

// A reload that changes only overrides applies them at once: the agent
// hears tools/list_changed and lists the new names, and the backend is
// neither restarted nor asked for its tools again.
func TestOverrideChangeAppliesOnReloadWithListChanged(t *testing.T) {
	r := startReloadable(t, backendTOML(t, "fx"))
	changed := make(chan struct{}, 10)
	cs := connect(t, r.Mux, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	if names := toolNames(t, cs); !slices.Contains(names, "fx__echo") {
		t.Fatalf("before the reload: %v", names)
	}
	before := fixtureStats(t, cs, "fx__stats")

	writeFile(t, r.path, backendTOML(t, "fx", "[[backend.override]]", `tool = "echo"`, `name = "say"`, `description = "Repeats zanzibar."`))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after a reload changed an override")
	}
	tools := listedTools(t, cs)
	if tools["fx__echo"] != nil || tools["fx__say"] == nil || tools["fx__say"].Description != "Repeats zanzibar." {
		t.Errorf("after the reload: %v, fx__say %+v", keys(tools), tools["fx__say"])
	}
	if got := callText(t, cs, "fx__say", map[string]any{"text": "again"}); got != `{"text":"again"}` {
		t.Errorf("fx__say after the reload = %q", got)
	}
	after := fixtureStats(t, cs, "fx__stats")
	if after.PID != before.PID || after.ListTools != before.ListTools {
		t.Errorf("the backend was restarted or listed again: pid %d → %d, tools/list %d → %d", before.PID, after.PID, before.ListTools, after.ListTools)
	}
	if !strings.Contains(r.log.String(), "exposure_changed=[fx]") {
		t.Errorf("the reload is not logged as an exposure change of fx:\n%s", r.log)
	}
}

// check --connect says, naming FILE:LINE, which overrides change nothing
// (no such tool) and which take a name one of the backend's own tools has.
func TestCheckWarnsAboutOverridesOfMissingToolsAndTakenNames(t *testing.T) {
	text := backendTOML(t, "fx",
		"[[backend.override]]", `tool = "nope"`, `description = "x"`,
		"[[backend.override]]", `tool = "echo"`, `name = "stats"`,
		"[[backend.override]]", `tool = "hang"`, `name = "snooze"`)
	cfg := parseTOML(t, text)
	r := Inspect(context.Background(), cfg, testLogger(t), "test")
	// [[backend]] is line 1, name, command and args 2-4: the overrides start at 5.
	want := []string{
		cfg.Path + `:5: backend "fx": override of tool "nope": the backend lists no tool of that name`,
		cfg.Path + `:8: backend "fx": override of tool "echo": its name "stats" is also the name of one of the backend's own tools`,
	}
	if len(r.Warnings) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(r.Warnings, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(r.Warnings[i], w) {
			t.Errorf("warning %d = %q, want it to start with %q", i, r.Warnings[i], w)
		}
	}
	var offered []string
	for _, o := range r.Offered {
		offered = append(offered, o.Tools...)
	}
	if !slices.Contains(offered, "fx__snooze") || slices.Contains(offered, "fx__hang") {
		t.Errorf("check offers %v: want fx__snooze instead of fx__hang", offered)
	}
}

// A backend that is down keeps its catalog so that a call of one of its
// tools says it is down: that holds for a tool's new name, and the name
// an override replaced is unknown, as one it never had.
func TestOverriddenNamesOfADownBackend(t *testing.T) {
	fx := overridden(t)
	fx.Restart = config.RestartNever
	m := startMux(t, fx)
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__crash", Arguments: map[string]any{"code": 1}})
	testkit.Eventually(t, 10*time.Second, "fx to be down", func() bool { return !m.members()[0].serving() })

	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__say", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), `backend "fx" is`) {
		t.Errorf("fx__say of a down backend: %v, want its state", err)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{}})
	echo := rpcCode(t, err)
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__never_had", Arguments: map[string]any{}})
	never := rpcCode(t, err)
	if !strings.HasPrefix(echo.Message, `unknown tool "fx__echo"`) || strings.Replace(echo.Message, "fx__echo", "fx__never_had", 1) != never.Message {
		t.Errorf("fx__echo: %d %q, want the answer for a name it never had, %q", echo.Code, echo.Message, never.Message)
	}
}

// What mux remembers of a backend is what the backend offered, not what
// overrides made of it: a run with an override lists the remembered
// catalog overridden without starting the backend, and a run without it
// lists the backend's own tool again.
func TestARememberedCatalogIsOverriddenWithoutAStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	learn(t, testConfig(overridden(t)), path)

	m := runWithMemory(t, testConfig(overridden(t)), path)
	tools := listedTools(t, connect(t, m, nil))
	if tools["fx__deep"] == nil || tools["fx__deep"].Description != "Answers with zanzibar precision." || tools["fx__rich"] != nil {
		t.Errorf("remembered and overridden: %v", keys(tools))
	}
	if state, pid := stateOf(m, "fx"); state != stateRemembered || pid != 0 {
		t.Errorf("fx: state %q pid %d: an override needs no start", state, pid)
	}
	m.Close()

	plain := runWithMemory(t, testConfig(fixture(t, "fx", "-rich")), path)
	tools = listedTools(t, connect(t, plain, nil))
	if rich := tools["fx__rich"]; rich == nil || rich.Description != "has every optional field" || !rich.Annotations.ReadOnlyHint || tools["fx__deep"] != nil {
		t.Errorf("remembered without the override: %v, fx__rich %+v: want the backend's own tool", keys(tools), rich)
	}
	if state, _ := stateOf(plain, "fx"); state != stateRemembered {
		t.Errorf("fx: state %q, want remembered", state)
	}
}
