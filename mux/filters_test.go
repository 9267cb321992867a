package mux

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Filters (tools, exclude_tools, prompts, exclude_prompts) as a client sees
// them; the config rules are tested in config/filters_test.go.

// wantUnknown asserts err is the -32602 a name that does not exist gets.
func wantUnknown(t *testing.T, err error, kind, name string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s %s: no error, want -32602", kind, name)
		return
	}
	je := rpcCode(t, err)
	if want := `unknown ` + kind + ` "` + name + `"`; je.Code != jsonrpc.CodeInvalidParams || je.Message != want {
		t.Errorf("%s %s: %d %q, want -32602 %q", kind, name, je.Code, je.Message, want)
	}
}

func TestFilteredToolsAndPromptsAreAbsentAndUnknown(t *testing.T) {
	notes := fixture(t, "notes", "-prompts", "alpha,beta")
	// The fixture's tools: echo and its control tools (stats, sleep, ...).
	notes.Tools = []string{"s*", "crash", "[eh]*"}
	notes.ExcludeTools = []string{"set_*", "hang"}
	notes.ExcludePrompts = []string{"g*"}
	plain := fixture(t, "plain")
	m := startMux(t, notes, plain)
	cs := connect(t, m, nil)

	var notesTools []string
	for _, n := range toolNames(t, cs) {
		if strings.HasPrefix(n, "notes__") {
			notesTools = append(notesTools, n)
		}
	}
	slices.Sort(notesTools)
	if want := []string{"notes__crash", "notes__echo", "notes__sleep", "notes__stats"}; !slices.Equal(notesTools, want) {
		t.Errorf("notes tools = %q, want %q", notesTools, want)
	}
	if !slices.Contains(toolNames(t, cs), "plain__hang") {
		t.Errorf("plain's tools are filtered too: %q", toolNames(t, cs))
	}
	prompts := promptNames(t, cs)
	slices.Sort(prompts)
	if want := []string{"notes__alpha", "notes__beta", "plain__greet"}; !slices.Equal(prompts, want) {
		t.Errorf("prompts = %q, want %q", prompts, want)
	}

	ctx := testkit.CtxT(t)
	for _, name := range []string{"notes__hang", "notes__set_content", "notes__update", "notes__no_such_tool"} {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		wantUnknown(t, err, "tool", name)
	}
	_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "notes__greet", Arguments: map[string]string{"name": "x"}})
	wantUnknown(t, err, "prompt", "notes__greet")
	_, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "notes__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "a"}})
	wantUnknown(t, err, "prompt", "notes__greet")
	if got := callText(t, cs, "notes__echo", map[string]any{"text": "hi"}); !strings.Contains(got, "hi") {
		t.Errorf("notes__echo = %q", got)
	}
}

// TestFilteredToolOfADownBackendIsUnknown: a backend that is down keeps its
// last catalog so that a call of one of its tools says which backend is
// down; a tool it had but that is filtered out must still be unknown,
// with the same answer as a name it never had (which says why its
// backend is down).
func TestFilteredToolOfADownBackendIsUnknown(t *testing.T) {
	notes := fixture(t, "notes")
	notes.Restart = config.RestartNever
	notes.ExcludeTools = []string{"hang"}
	m := startMux(t, notes)
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes__crash", Arguments: map[string]any{"code": 1}})
	testkit.Eventually(t, 10*time.Second, "notes to be down", func() bool { return !m.members()[0].serving() })

	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes__echo", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), `backend "notes" is`) {
		t.Errorf("notes__echo of a down backend: %v, want its state", err)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes__hang", Arguments: map[string]any{}})
	hang := rpcCode(t, err)
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes__never_had", Arguments: map[string]any{}})
	never := rpcCode(t, err)
	if hang.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(hang.Message, `unknown tool "notes__hang": backend "notes"`) ||
		strings.Replace(hang.Message, "notes__hang", "notes__never_had", 1) != never.Message {
		t.Errorf("notes__hang: %d %q, want -32602 and the answer for a name it never had, %q", hang.Code, hang.Message, never.Message)
	}
}

// TestFilterChangeAppliesAtTheNextRebuild: a reload replaces a member's
// spec and rebuilds the catalog; the new filters must apply then, without
// the backend being listed again.
func TestFilterChangeAppliesAtTheNextRebuild(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs := connect(t, m, nil)
	if !slices.Contains(toolNames(t, cs), "notes__hang") {
		t.Fatalf("notes__hang missing before the change: %q", toolNames(t, cs))
	}
	mem := m.members()[0]
	mem.mu.Lock()
	spec := mem.spec
	spec.ExcludeTools = []string{"hang"}
	mem.spec = spec
	mem.mu.Unlock()
	m.cat.rebuild(m)
	if slices.Contains(toolNames(t, cs), "notes__hang") {
		t.Errorf("notes__hang still listed after its exclusion: %q", toolNames(t, cs))
	}
	_, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__hang", Arguments: map[string]any{}})
	wantUnknown(t, err, "tool", "notes__hang")
}

func TestCheckWarnsAboutPatternsThatMatchNothingAndLongNames(t *testing.T) {
	long := strings.Repeat("p", 60) // + "__" + "echo" = 66 characters
	notes := fixture(t, "notes")
	notes.Tools = []string{"echo", "nomatch*", "stats"}
	notes.ExcludeTools = []string{"stats", "zz?"}
	notes.ExcludePrompts = []string{"greet", "missing"}
	other := fixture(t, "other")
	other.Prefix = &long
	other.Tools = []string{"echo", "stats"}
	other.Prompts = []string{"nothing"}
	failing := fixture(t, "failing", "-fail-start")
	failing.Tools = []string{"never-checked"}
	failing.Restart = config.RestartNever
	cfg := testConfig(notes, other, failing)
	r := Inspect(context.Background(), cfg, testLogger(t), "test")
	want := []string{
		`backend "notes": tools pattern "nomatch*" matches none of its tools`,
		`backend "notes": exclude_tools pattern "zz?" matches none of its tools`,
		`backend "notes": exclude_prompts pattern "missing" matches none of its prompts`,
		`backend "other": prompts pattern "nothing" matches none of its prompts`,
		`tool name "` + long + `__echo" is 66 characters`,
		`tool name "` + long + `__stats" is 67 characters`,
	}
	if len(r.Warnings) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(r.Warnings, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.Contains(r.Warnings[i], w) {
			t.Errorf("warning %d = %q, want it to contain %q", i, r.Warnings[i], w)
		}
	}
	for _, w := range r.Warnings {
		if strings.Contains(w, "never-checked") {
			t.Errorf("a backend that did not start is judged on an empty list: %q", w)
		}
	}
	if !strings.Contains(r.Warnings[4], "over the 64") {
		t.Errorf("long name warning does not say the limit: %q", r.Warnings[4])
	}
}

func TestLongNameIsLoggedOncePerName(t *testing.T) {
	long := strings.Repeat("q", 60)
	notes := fixture(t, "notes", "-tools", "echo,e22")
	notes.Prefix = &long
	var buf testkit.SyncBuffer
	m := New(testConfig(notes), log.New(&buf), "test")
	m.backoffBase = 10 * time.Millisecond
	m.Start()
	t.Cleanup(m.Close)
	cs := connect(t, m, nil)
	toolNames(t, cs)
	for range 3 {
		m.cat.rebuild(m)
	}
	callText(t, cs, long+"__add_tool", map[string]any{"name": "e33"})
	testkit.Eventually(t, 10*time.Second, "the new tool", func() bool { return slices.Contains(toolNames(t, cs), long+"__e33") })
	out := buf.String()
	for _, name := range []string{"__echo", "__e22", "__e33", "__notify_list_changed"} {
		if n := len(regexp.MustCompile(regexp.QuoteMeta(long+name)+`\b`).FindAllString(out, -1)); n != 1 {
			t.Errorf("%s logged %d times, want once:\n%s", name, n, out)
		}
	}
}

// TestResourceCollisionIsLoggedOnceWhenServing: a URI two backends both
// list is logged when serving (before, only check --connect said it), and
// once, however often the lists change.
func TestResourceCollisionIsLoggedOnceWhenServing(t *testing.T) {
	var buf testkit.SyncBuffer
	m := New(testConfig(fixture(t, "a", "-list-uris", "shared://doc"), fixture(t, "b", "-list-uris", "shared://doc")), log.New(&buf), "test")
	m.backoffBase = 10 * time.Millisecond
	m.Start()
	t.Cleanup(m.Close)
	cs := connect(t, m, nil)
	toolNames(t, cs)
	callText(t, cs, "b__add_tool", map[string]any{"name": "more"}) // b's lists change: it is asked again
	testkit.Eventually(t, 10*time.Second, "b's new tool", func() bool { return slices.Contains(toolNames(t, cs), "b__more") })
	if n := strings.Count(buf.String(), "resource collision: the first backend in config order wins"); n != 1 || !strings.Contains(buf.String(), "name=shared://doc winner=a loser=b") {
		t.Errorf("the collision was logged %d times, want once, naming both:\n%s", n, buf.String())
	}
}
