package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The tool list of a stdio session, through the built binary: what "auto"
// gives an agent mcp-mux does not know, and a mode asked for with
// --tool-list or MCP_MUX_TOOL_LIST, as an HTTP agent asks with the
// Mcp-Mux-Tool-List header.

// toolListConfig writes a config of one fixture backend with 70 tools
// and the given [mux] tool_list ("" for none).
func toolListConfig(t *testing.T, mode string) string {
	t.Helper()
	var names []string
	for i := range 70 {
		names = append(names, fmt.Sprintf("tool%02d", i))
	}
	src := fmt.Sprintf("[[backend]]\nname = \"many\"\ncommand = %q\nargs = [\"-tools\", %q]\n", testkit.FixtureBin(t), strings.Join(names, ","))
	if mode != "" {
		src = fmt.Sprintf("[mux]\ntool_list = %q\n\n", mode) + src
	}
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// stdioTools starts mcp-mux with args and env over stdio, as the agent
// named client, and returns the names it lists.
func stdioTools(t *testing.T, client string, env []string, args ...string) map[string]bool {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	c := mcp.NewClient(&mcp.Implementation{Name: client, Version: "1"}, nil)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools := map[string]bool{}
	for tool, err := range cs.Tools(testkit.CtxT(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools[tool.Name] = true
	}
	return tools
}

func TestStdioToolListByFlagAndEnvironment(t *testing.T) {
	const every = 70 // many's tools, and more
	search := func(tools map[string]bool) bool {
		return len(tools) == 3 && tools["search_tools"] && tools["call_tool"] && tools["call_read_only_tool"]
	}
	for _, tc := range []struct {
		name, config, client string
		env, args            []string
		search               bool
	}{
		// The MCP Inspector, the README's try-it client, is an agent
		// mcp-mux does not know: it gets every tool, as it does directly.
		{"auto/the Inspector", "", "inspector-client", nil, nil, false},
		{"--tool-list search", "", "inspector-client", nil, []string{"--tool-list", "search"}, true},
		{"MCP_MUX_TOOL_LIST=search", "", "inspector-client", []string{"MCP_MUX_TOOL_LIST=search"}, nil, true},
		{"--tool-list all over the config's search", "search", "claude-ai", nil, []string{"--tool-list", "all"}, false},
		{"MCP_MUX_TOOL_LIST=all over the config's search", "search", "claude-ai", []string{"MCP_MUX_TOOL_LIST=all"}, nil, false},
		{"--tool-list auto over the config's search", "search", "inspector-client", nil, []string{"--tool-list", "auto"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--config", toolListConfig(t, tc.config))
			tools := stdioTools(t, tc.client, tc.env, args...)
			if tc.search && !search(tools) {
				t.Errorf("listed %d tools, want the search surface (search_tools and the two wrappers)", len(tools))
			}
			if !tc.search && (len(tools) < every || !tools["many__tool69"] || tools["search_tools"]) {
				t.Errorf("listed %d tools (search_tools: %v), want every tool", len(tools), tools["search_tools"])
			}
		})
	}
}

// A mode that is none of the three is refused at once, naming them; so is
// asking for one with --http, where each agent asks for its own.
func TestStdioToolListMistakesAreRefusedAtOnce(t *testing.T) {
	path := toolListConfig(t, "")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"--tool-list", nil, []string{"--tool-list", "some"}, []string{`--tool-list (or MCP_MUX_TOOL_LIST) must be "all" (every tool), "search" (`, `or "auto" (by agent) (got "some")`}},
		{"MCP_MUX_TOOL_LIST", []string{"MCP_MUX_TOOL_LIST=everything"}, nil, []string{`--tool-list (or MCP_MUX_TOOL_LIST) must be "all" (every tool)`, `(got "everything")`}},
		{"with --http", nil, []string{"--tool-list", "all", "--http", "127.0.0.1:0"}, []string{"over HTTP each agent asks for its own with the Mcp-Mux-Tool-List header or ?tool_list= on the URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(testkit.MuxBin(t), append(tc.args, "--config", path)...)
			cmd.Env = append(os.Environ(), tc.env...)
			cmd.Stdin = strings.NewReader("")
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 1 {
				t.Fatalf("exit: %v, want 1; stderr %q", err, errb.String())
			}
			for _, want := range tc.want {
				if !strings.Contains(errb.String(), want) {
					t.Errorf("stderr %q lacks %q", errb.String(), want)
				}
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q: nothing may reach it", out.String())
			}
		})
	}
}
