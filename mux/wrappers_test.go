package mux

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// What an approval of a wrapper allows (wrappers.go): no more than its
// annotations say, and never a tool the agent has under its own name.

// wrapperMux is a search-mode mux over one fixture backend, "fx": its
// "rich" tool says readOnlyHint, its "echo" and "stats" say nothing (so
// they may write and destroy, by the spec's defaults).
func wrapperMux(t *testing.T, mode string) *Mux {
	t.Helper()
	cfg := testConfig(fixture(t, "fx", "-rich"))
	cfg.Mux.ToolList, cfg.Mux.ToolListMax = mode, 64
	return startMuxConfig(t, cfg)
}

// wrapped calls wrapper with the tool name and args.
func wrapped(t *testing.T, cs *mcp.ClientSession, wrapper, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: wrapper, Arguments: map[string]any{"name": name, "arguments": args}})
	if err != nil {
		t.Fatalf("%s %s: %v", wrapper, name, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// echoed reports whether fx's echo ran: its result is the text it got.
func echoed(res *mcp.CallToolResult, text string) bool {
	return !res.IsError && strings.Contains(resultText(res), text)
}

func TestWrappersAreAnnotatedForWhatTheyRun(t *testing.T) {
	m := wrapperMux(t, config.ToolListSearch)
	cs := agentNamed(t, m, "claude-ai", nil) // Claude Desktop: it does not list again
	tools := listedTools(t, cs)
	ro, gen := tools[toolCallReadOnly], tools[toolCall]
	if ro == nil || gen == nil || tools[toolSearch] == nil {
		t.Fatalf("listed %v: want search_tools and both wrappers", keys(tools))
	}
	if a := ro.Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("call_read_only_tool's annotations %+v: want readOnlyHint", a)
	}
	if a := gen.Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
		t.Errorf("call_tool's annotations %+v: want destructiveHint and openWorldHint", a)
	}
	if !strings.Contains(ro.Description, "read-only") || !strings.Contains(gen.Description, "ANY tool") {
		t.Errorf("the descriptions do not say what each runs:\n%s\n%s", ro.Description, gen.Description)
	}

	// The read-only wrapper runs a read-only tool, and refuses one that
	// may write; the backend never sees the refused call.
	if res := wrapped(t, cs, toolCallReadOnly, "fx__rich", map[string]any{"q": "x"}); res.IsError || !strings.Contains(resultText(res), "42") {
		t.Errorf("call_read_only_tool fx__rich: %v %q", res.IsError, resultText(res))
	}
	before := fixtureStats(t, cs, "fx__stats").Requests
	res := wrapped(t, cs, toolCallReadOnly, "fx__echo", map[string]any{"text": "should not run"})
	if !res.IsError || echoed(res, "should not run") || !strings.Contains(resultText(res), "readOnlyHint") {
		t.Errorf("call_read_only_tool ran fx__echo, which may write: %v %q", res.IsError, resultText(res))
	}
	// (fixtureStats itself is one call through the backend's own name.)
	if after := fixtureStats(t, cs, "fx__stats").Requests; after != before+1 {
		t.Errorf("the backend got %d requests between two stats calls: the refused call reached it", after-before-1)
	}
	// The general wrapper runs it: its own annotations say it may.
	if res := wrapped(t, cs, toolCall, "fx__echo", map[string]any{"text": "ran"}); !echoed(res, "ran") {
		t.Errorf("call_tool fx__echo: %v %q", res.IsError, resultText(res))
	}
	// A wrapper cannot call a wrapper.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: toolCallReadOnly, Arguments: map[string]any{"name": toolCall, "arguments": map[string]any{"name": "fx__echo"}}}); err == nil {
		t.Error("call_read_only_tool called call_tool")
	}
}

// An agent that lists again (Copilot CLI) gets a tool it found under the
// tool's own name, and no wrapper runs a tool the agent has under its own
// name.
func TestAFoundToolIsCalledByItsOwnName(t *testing.T) {
	changed := make(chan struct{}, 10)
	m := wrapperMux(t, config.ToolListSearch)
	cs := agentNamed(t, m, "copilot-cli", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	if tools := listedTools(t, cs); tools["fx__echo"] != nil {
		t.Fatalf("fx__echo listed before it was found")
	}
	if found, _ := searchFor(t, cs, map[string]any{"query": "fx__echo"}); len(found) == 0 || found[0] != "fx__echo" {
		t.Fatalf("search found %v", found)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after a search found a tool")
	}
	if tools := listedTools(t, cs); tools["fx__echo"] == nil {
		t.Fatalf("after the search, fx__echo is not listed: %v", keys(tools))
	}
	for _, w := range []string{toolCall, toolCallReadOnly} {
		if res := wrapped(t, cs, w, "fx__echo", map[string]any{"text": "through"}); !res.IsError || echoed(res, "through") || !strings.Contains(resultText(res), "own name") {
			t.Errorf("%s ran fx__echo, which the agent has under its own name: %q", w, resultText(res))
		}
	}
	if res := callText(t, cs, "fx__echo", map[string]any{"text": "direct"}); !strings.Contains(res, "direct") {
		t.Errorf("fx__echo by its name: %q", res)
	}
	// A pinned tool is listed from the start: the same.
	cfg := testConfig(fixture(t, "fx"))
	cfg.Backends[0].Pin = []string{"echo"}
	cfg.Mux.ToolList = config.ToolListSearch
	pinnedCS := agentNamed(t, startMuxConfig(t, cfg), "claude-ai", nil)
	listedTools(t, pinnedCS)
	if res := wrapped(t, pinnedCS, toolCall, "fx__echo", map[string]any{"text": "pinned"}); !res.IsError || echoed(res, "pinned") {
		t.Errorf("call_tool ran the pinned fx__echo: %q", resultText(res))
	}
}

// An agent whose model does not see a list_changed within its turn
// (Gemini CLI, opencode, Codex, an agent not known) lists again in the
// background, yet its model still has only the wrappers: call_tool runs
// what search_tools found, where refusing it ("call it by its own name")
// left the model with nothing to call. The wrappers' own annotations still
// bound what each runs, and a pinned tool, in its list from the start, is
// still called by its name.
func TestAFoundToolRunsThroughCallToolForAnAgentWhoseModelCannotSeeItYet(t *testing.T) {
	for _, agent := range []string{"gemini-cli-mcp-client", "opencode", "codex-mcp-client", "some-agent"} {
		t.Run(agent, func(t *testing.T) {
			changed := make(chan struct{}, 10)
			cfg := testConfig(fixture(t, "fx", "-rich", "-tools", "echo,pinned"))
			cfg.Backends[0].Pin = []string{"pinned"}
			cfg.Mux.ToolList = config.ToolListSearch
			cs := agentNamed(t, startMuxConfig(t, cfg), agent, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				changed <- struct{}{}
			}})
			if tools := listedTools(t, cs); tools[toolCall] == nil || tools[toolCallReadOnly] == nil || tools["fx__echo"] != nil {
				t.Fatalf("first list %v: want the wrappers, and not fx__echo", keys(tools))
			}
			if found, _ := searchFor(t, cs, map[string]any{"query": "fx__echo"}); len(found) == 0 || found[0] != "fx__echo" {
				t.Fatalf("search found %v", found)
			}
			searchFor(t, cs, map[string]any{"query": "rich"})
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatal("no tools/list_changed after a search found a tool")
			}
			listedTools(t, cs) // the agent lists again; its model sees that list later, if ever
			if res := wrapped(t, cs, toolCall, "fx__echo", map[string]any{"text": "found"}); !echoed(res, "found") {
				t.Errorf("call_tool fx__echo, found by search_tools: %v %q", res.IsError, resultText(res))
			}
			if res := wrapped(t, cs, toolCallReadOnly, "fx__rich", map[string]any{"q": "x"}); res.IsError || !strings.Contains(resultText(res), "42") {
				t.Errorf("call_read_only_tool fx__rich, read-only and found: %v %q", res.IsError, resultText(res))
			}
			if res := wrapped(t, cs, toolCallReadOnly, "fx__echo", map[string]any{"text": "not read-only"}); !res.IsError || !strings.Contains(resultText(res), "readOnlyHint") {
				t.Errorf("call_read_only_tool ran fx__echo, which may write: %q", resultText(res))
			}
			if res := wrapped(t, cs, toolCall, "fx__pinned", map[string]any{"text": "pinned"}); !res.IsError || echoed(res, "pinned") || !strings.Contains(resultText(res), "own name") {
				t.Errorf("call_tool ran the pinned fx__pinned, listed from the start: %q", resultText(res))
			}
		})
	}
}

// Claude Code (and every agent known to list again) is never offered a
// wrapper, in any mode, and one it calls anyway does not run the tool: its
// permission rules, which name tools (mcp__mcp-mux__fx__echo), always apply.
func TestAnAgentThatListsAgainIsNeverOfferedAWrapper(t *testing.T) {
	for _, mode := range []string{config.ToolListSearch, config.ToolListAll, config.ToolListAuto} {
		for _, agent := range []string{"claude-code", "cursor-vscode", "Visual Studio Code"} {
			t.Run(mode+"/"+agent, func(t *testing.T) {
				changed := make(chan struct{}, 10)
				m := wrapperMux(t, mode)
				cs := agentNamed(t, m, agent, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					changed <- struct{}{}
				}})
				tools := listedTools(t, cs)
				if tools[toolCall] != nil || tools[toolCallReadOnly] != nil {
					t.Fatalf("%s was offered a wrapper: %v", agent, keys(tools))
				}
				for _, w := range []string{toolCall, toolCallReadOnly} {
					arg := map[string]any{"text": "wrapped"}
					if w == toolCallReadOnly {
						arg = map[string]any{"q": "x"}
					}
					name := map[string]string{toolCall: "fx__echo", toolCallReadOnly: "fx__rich"}[w]
					res := wrapped(t, cs, w, name, arg)
					if !res.IsError || echoed(res, "wrapped") || strings.Contains(resultText(res), "42") {
						t.Errorf("%s ran %s for %s: %q", w, name, agent, resultText(res))
					}
				}
				if mode != config.ToolListSearch {
					return
				}
				// In search mode the tool it asked for is listed to it now.
				select {
				case <-changed:
				case <-time.After(10 * time.Second):
					t.Fatal("no tools/list_changed")
				}
				if tools := listedTools(t, cs); tools["fx__echo"] == nil || tools["fx__rich"] == nil {
					t.Errorf("the tools it asked a wrapper for are not listed: %v", keys(tools))
				}
			})
		}
	}
}

func TestPermits(t *testing.T) {
	yes, no := ptr(true), ptr(false)
	ro := wrapperAnnotations[toolCallReadOnly]
	gen := wrapperAnnotations[toolCall]
	for _, tc := range []struct {
		name string
		tool *mcp.ToolAnnotations
		ro   bool // call_read_only_tool may run it
	}{
		{"no annotations (may write, destroy, reach out)", nil, false},
		{"read-only", &mcp.ToolAnnotations{ReadOnlyHint: true}, true},
		{"read-only, closed world", &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: no}, true},
		{"not destructive but writes", &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no}, false},
		{"destructive", &mcp.ToolAnnotations{DestructiveHint: yes}, false},
		{"only a title", &mcp.ToolAnnotations{Title: "Reads things"}, false},
	} {
		if got := permits(ro, tc.tool); got != tc.ro {
			t.Errorf("call_read_only_tool, %s: %v, want %v", tc.name, got, tc.ro)
		}
		if !permits(gen, tc.tool) {
			t.Errorf("call_tool refuses %s", tc.name)
		}
	}
	// A wrapper narrower than call_tool in each hint refuses what is wider.
	closed := &mcp.ToolAnnotations{DestructiveHint: no, IdempotentHint: true, OpenWorldHint: no}
	for _, tc := range []struct {
		name string
		tool *mcp.ToolAnnotations
		want bool
	}{
		{"same", &mcp.ToolAnnotations{DestructiveHint: no, IdempotentHint: true, OpenWorldHint: no}, true},
		{"destructive", &mcp.ToolAnnotations{DestructiveHint: yes, IdempotentHint: true, OpenWorldHint: no}, false},
		{"not idempotent", &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no}, false},
		{"open world", &mcp.ToolAnnotations{DestructiveHint: no, IdempotentHint: true, OpenWorldHint: yes}, false},
		{"read-only", &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: no}, true},
	} {
		if got := permits(closed, tc.tool); got != tc.want {
			t.Errorf("a closed, idempotent wrapper, %s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func keys(m map[string]*mcp.Tool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A search hint is a plain sentence, never a markdown heading.
func TestSearchHintIsAPlainSentence(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"# Everything Server – Server Instructions\n\nThis server exercises every MCP feature. It has tools.", "This server exercises every MCP feature."},
		{"## Usage\n\n- **Always** call `resolve` first. Then get docs.", "Always call resolve first."},
		{"```\ncode here. more\n```\nPlain text here", "Plain text here"},
		{"---\n| a | b |\n\nUse it for maps.", "Use it for maps."},
		{"# Only a heading", ""},
		{"One line without a stop", "One line without a stop"},
	} {
		if got := firstSentence(tc.in); got != tc.want {
			t.Errorf("firstSentence(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// An agent that ignores list_changed never learns of a backend that came
// late: its first list waits for every backend (up to startup_timeout),
// where another agent's waits first_list_wait.
func TestAnAgentThatIgnoresListChangedGetsEveryBackendInItsFirstList(t *testing.T) {
	for _, tc := range []struct {
		agent string
		slow  bool // the slow backend's tool is in the first list
	}{
		{"claude-ai", true},
		{"some-agent", false},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			cfg := testConfig(fixture(t, "quick"), fixture(t, "slow", "-start-delay", "4s"))
			cfg.Mux.ToolList = config.ToolListAll
			cfg.Mux.FirstListWait.Duration = time.Second // the slow one cannot be ready by then
			m := startMuxConfig(t, cfg)
			tools := listedTools(t, agentNamed(t, m, tc.agent, nil))
			if got := tools["slow__echo"] != nil; got != tc.slow {
				t.Errorf("%s's first list has the slow backend's tool: %v, want %v (%v)", tc.agent, got, tc.slow, keys(tools))
			}
			if tc.slow && tools["quick__echo"] == nil {
				t.Errorf("the quick backend's tool is missing: %v", keys(tools))
			}
		})
	}
}

// The audit log tells a call made through a wrapper from one by name (the
// approval that let it run was the wrapper's), and has a line for a call a
// wrapper refused, with outcome "refused": a refusal is what an auditor
// looks for.
func TestTheAuditLogNamesTheWrapperAndTheCallsItRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	cfg := testConfig(fixture(t, "fx", "-rich"))
	cfg.Mux.ToolList, cfg.Mux.ToolListMax, cfg.Mux.AuditLog = config.ToolListSearch, 64, path
	m := startMuxConfig(t, cfg)
	cs := agentNamed(t, m, "claude-ai", nil) // it does not list again: the wrappers run what it found

	callText(t, cs, "fx__echo", map[string]any{"text": "by name"})
	if res := wrapped(t, cs, toolCall, "fx__echo", map[string]any{"text": "through"}); !echoed(res, "through") {
		t.Fatalf("call_tool fx__echo: %q", resultText(res))
	}
	if res := wrapped(t, cs, toolCallReadOnly, "fx__echo", map[string]any{"text": "refused"}); !res.IsError {
		t.Fatalf("call_read_only_tool ran fx__echo: %q", resultText(res))
	}
	var lines []map[string]any
	testkit.Eventually(t, 10*time.Second, "3 audit lines", func() bool {
		lines = auditLines(t, path)
		return len(lines) >= 3
	})
	want := []map[string]any{
		{"tool": "fx__echo", "outcome": "ok", "via": nil},
		{"tool": "fx__echo", "outcome": "ok", "via": toolCall},
		{"tool": "fx__echo", "outcome": "refused", "via": toolCallReadOnly},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d audit lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, l := range lines {
		for k, v := range want[i] {
			if l[k] != v {
				t.Errorf("line %d: %s = %v, want %v\n%v", i+1, k, l[k], v, l)
			}
		}
		if l["backend"] != "fx" || l["method"] != "tools/call" || fmt.Sprint(l["argument_names"]) != "[text]" {
			t.Errorf("line %d: backend, method, argument_names = %v %v %v, want fx tools/call [text]", i+1, l["backend"], l["method"], l["argument_names"])
		}
	}
}
