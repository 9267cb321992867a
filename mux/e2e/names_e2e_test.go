package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/agents"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The four servers, as fixtures that list their tools (from
// testdata/toolsearch/catalog.json: executeautomation's Playwright server
// registered as executeautomation-playwright, server-memory,
// server-filesystem; server-everything's tool names), and a backend with
// two tools whose own names are too long for any agent. Every echo tool
// says which backend and tool it is. toolList is [mux] tool_list.
func namesConfig(t *testing.T, toolList string, extra ...string) string {
	t.Helper()
	catalog, err := filepath.Abs("../../testdata/toolsearch/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	long := "get_the_current_status_of_every_deployment_in_the_organization_by_"
	return testkit.WriteConfig(t, "tool_list = \""+toolList+"\"\n"+strings.Join(extra, "\n"),
		[]string{"everything", "-name", "everything", "-echo-name", "-tools", "echo,get-sum,get-env,get-tiny-image,get-annotated-message,get-resource-links,get-resource-reference,get-structured-content,gzip-file-as-resource,toggle-simulated-logging,toggle-subscriber-updates,trigger-long-running-operation,trigger-sampling-request,trigger-elicitation-request"},
		[]string{"memory", "-name", "memory", "-echo-name", "-catalog", catalog, "-catalog-backend", "memory"},
		[]string{"filesystem", "-name", "filesystem", "-echo-name", "-catalog", catalog, "-catalog-backend", "filesystem"},
		[]string{"executeautomation-playwright", "-name", "executeautomation-playwright", "-echo-name", "-catalog", catalog, "-catalog-backend", "ea-playwright"},
		[]string{"deploy", "-name", "deploy", "-echo-name", "-tools", long + "team," + long + "region"},
	)
}

// connectAs runs mcp-mux over stdio with args and connects to it as the
// agent whose clientInfo name is client, in the era of version ("": the
// current one).
func connectAs(t *testing.T, client, version string, args ...string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: client, Version: "1"}, nil)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: exec.Command(testkit.MuxBin(t), args...)}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("%s: connect: %v", client, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(testkit.CtxT(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// echoed is what a call of name with arguments {"n": n} reached:
// "BACKEND/TOOL" (the fixture's -echo-name), as its full name BACKEND__TOOL.
func echoed(t *testing.T, cs *mcp.ClientSession, name string, n int) string {
	t.Helper()
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"n": n}})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("call %s: %v %+v", name, err, res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	who, args, _ := strings.Cut(text, " ")
	if args != fmt.Sprintf(`{"n":%d}`, n) {
		t.Errorf("call %s: the backend got %s", name, args)
	}
	backend, tool, _ := strings.Cut(who, "/")
	return backend + "__" + tool
}

// For each agent with a name limit, as its clientInfo names it: every
// name it would show its model is within its limit and unique, names that
// fit are as they were, and calling each name reaches its own tool, in
// both eras.
func TestToolNamesFitEachAgent(t *testing.T) {
	cfg := namesConfig(t, "all")
	var full []string
	echoTools := map[string]bool{}
	for tool, err := range connectAs(t, "raw", "2025-11-25", "--config", cfg).Tools(testkit.CtxT(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		full = append(full, tool.Name)
		backend, _, _ := strings.Cut(tool.Name, "__")
		// The fixtures' control tools need arguments of their own.
		echoTools[tool.Name] = tool.Description == "echoes its arguments as JSON text" || !slices.Contains([]string{"everything", "deploy"}, backend)
	}
	for _, c := range []struct{ client, version string }{
		{"gemini-cli-mcp-client", "2025-06-18"},
		{"opencode", "2025-11-25"},
		{"copilot-cli", ""}, // server/discover, as Copilot CLI sends first
		{"codex-mcp-client", "2025-06-18"},
		{"claude-code", ""}, // server/discover, as Claude Code sends first
	} {
		t.Run(c.client, func(t *testing.T) {
			a := agents.Of(c.client)
			cs := connectAs(t, c.client, c.version, "--config", cfg)
			names := listNames(t, cs)
			if len(names) != len(full) {
				t.Fatalf("%d tools listed, %d to an agent with no limit", len(names), len(full))
			}
			shown := map[string]bool{}
			renamed := 0
			for i, name := range names {
				s := a.ToolName("mcp-mux", name)
				if n := utf8.RuneCountInString(s); n > a.NameLimit {
					t.Errorf("%s shows as %q, %d characters: over its %d", name, s, n, a.NameLimit)
				}
				if shown[s] {
					t.Errorf("two tools show as %q", s)
				}
				shown[s] = true
				if utf8.RuneCountInString(a.ToolName("mcp-mux", full[i])) <= a.NameLimit && name != full[i] {
					t.Errorf("%q fits, and is listed as %q", full[i], name)
				}
				if name != full[i] {
					renamed++
				}
				if echoTools[full[i]] {
					if got := echoed(t, cs, name, i); got != full[i] {
						t.Errorf("a call of %q reached %s, want %s", name, got, full[i])
					}
				}
			}
			t.Logf("%d of %d tools renamed", renamed, len(names))
		})
	}
}

// renamedOf is the first name of names that is not one of full (a
// shortened one), and the full name it stands for.
func renamedOf(t *testing.T, names, full []string) (short, long string) {
	t.Helper()
	for i, name := range names {
		if name != full[i] {
			return name, full[i]
		}
	}
	t.Fatalf("no name shortened in %v", names)
	return "", ""
}

// foundNames is the names search_tools finds for query, best first.
func foundNames(t *testing.T, cs *mcp.ClientSession, query string) []string {
	t.Helper()
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": query}})
	if err != nil || res.IsError {
		t.Fatalf("search_tools %q: %v %+v", query, err, res)
	}
	var out []string
	for _, tool := range res.StructuredContent.(map[string]any)["tools"].([]any) {
		out = append(out, tool.(map[string]any)["name"].(string))
	}
	return out
}

// In search mode, an agent finds a shortened tool by its name and by its
// full name, search_tools gives it the name it can call, call_tool runs
// it by that name, and it joins the agent's list under that name.
func TestShortenedToolsAreFoundAndCalledByTheirNames(t *testing.T) {
	cfg := namesConfig(t, "all")
	full := listNames(t, connectAs(t, "raw", "2025-11-25", "--config", cfg))
	gemini := connectAs(t, "gemini-cli-mcp-client", "2025-06-18", "--config", cfg)
	short, long := renamedOf(t, listNames(t, gemini), full)

	searching := connectAs(t, "gemini-cli-mcp-client", "2025-06-18", "--config", namesConfig(t, "search"))
	// Every shortened name, the two of deploy too, whose cut names differ
	// only in their hashes.
	for i, name := range listNames(t, gemini) {
		if name == full[i] {
			continue
		}
		for _, query := range []string{name, full[i]} {
			if got := foundNames(t, searching, query); len(got) == 0 || got[0] != name {
				t.Errorf("search_tools %q found %v, want %s first", query, got, name)
			}
		}
	}
	if got := foundNames(t, searching, "iframe click"); !slices.Contains(got, "executeautomation-playwrig__playwright_iframe_click") {
		t.Errorf("search_tools \"iframe click\" found %v", got)
	}
	res, err := searching.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": short, "arguments": map[string]any{"n": 1}}})
	if err != nil || res.IsError {
		t.Fatalf("call_tool %s: %v %+v", short, err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(text, strings.Replace(long, "__", "/", 1)+" ") {
		t.Errorf("call_tool %s reached %q, want %s", short, text, long)
	}
	if got := listNames(t, searching); !slices.Contains(got, short) || slices.Contains(got, long) {
		t.Errorf("the list after finding %s: %v", short, got)
	}
}

// Over HTTP each session has its agent's names, the audit log says the
// name the agent called, and a reload that adds a backend leaves the names
// given as they were.
func TestShortenedNamesOverHTTPAndAcrossAReload(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := namesConfig(t, "all", fmt.Sprintf("audit_log = %q", audit))
	full := listNames(t, connectAs(t, "raw", "2025-11-25", "--config", namesConfig(t, "all")))
	h := startHTTPMux(t, cfg)
	connect := func(client string) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: client, Version: "1"}, nil).Connect(testkit.CtxT(t), &mcp.StreamableClientTransport{Endpoint: h.url}, nil)
		if err != nil {
			t.Fatalf("connect: %v\nstderr:\n%s", err, h.stderr)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	opencode, raw := connect("opencode"), connect("raw")
	before := listNames(t, opencode)
	short, long := renamedOf(t, before, full)
	if got := echoed(t, opencode, short, 7); got != long {
		t.Errorf("a call of %q over HTTP reached %s, want %s", short, got, long)
	}
	if got := listNames(t, raw); !slices.Equal(got, full) {
		t.Errorf("another agent's session over HTTP lists %v", got)
	}
	var logged string
	if !testkit.Poll(5*time.Second, func() bool {
		data, _ := os.ReadFile(audit)
		logged = string(data)
		return strings.Contains(logged, `"tool":"`+short+`"`)
	}) {
		t.Errorf("the audit log does not name the call %s:\n%s", short, logged)
	}

	// A backend whose prefix begins as the long one's: the names given
	// stay, as they are still unique.
	src, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src = fmt.Appendf(src, "[[backend]]\nname = \"executeautomation-puppeteer\"\ncommand = %q\nargs = [\"-name\", \"p\", \"-tools\", \"puppeteer_navigate\"]\n", testkit.FixtureBin(t))
	if err := os.WriteFile(cfg, src, 0o644); err != nil {
		t.Fatal(err)
	}
	var after []string
	if !testkit.Poll(10*time.Second, func() bool {
		after = listNames(t, opencode)
		return slices.Contains(after, "executeautomation-puppeteer__puppeteer_navigate")
	}) {
		t.Fatalf("the added backend's tool is not listed: %v\nstderr:\n%s", after, h.stderr)
	}
	for _, name := range before {
		if !slices.Contains(after, name) {
			t.Errorf("%s is not listed after the reload", name)
		}
	}
}
