package agents

import "testing"

// The clientInfo names are the ones each agent sent a logging MCP server
// on this machine (Claude Code 2.1.328, Codex CLI 0.169.0, Gemini CLI
// 0.61.0, opencode 1.18.33, Copilot CLI 1.0.102).
func TestOfFindsEachAgentByItsClientInfoName(t *testing.T) {
	for client, want := range map[string]string{
		"claude-code":           "Claude Code",
		"codex-mcp-client":      "Codex CLI",
		"gemini-cli-mcp-client": "Gemini CLI",
		"opencode":              "opencode",
		"copilot-cli":           "Copilot CLI",
		"claude-ai":             "Claude Desktop",
		"Visual Studio Code":    "VS Code",
		"cursor-vscode":         "Cursor",
	} {
		if got := Of(client).Name; got != want {
			t.Errorf("Of(%q) = %q, want %q", client, got, want)
		}
	}
	if a := Of("mcp-inspector"); a.Known() || !a.ListChanged {
		t.Errorf("an unknown agent: %+v", a)
	}
}

// Each agent's own way of naming a server's tool, as seen in what it sent
// its model.
func TestToolNameIsWhatTheAgentShowsItsModel(t *testing.T) {
	for _, c := range []struct{ client, server, tool, want string }{
		{"claude-code", "mcp-mux", "mem__read_graph", "mcp__mcp-mux__mem__read_graph"},
		{"codex-mcp-client", "mcp-mux", "everything__get-sum", "everything__get_sum"},
		{"gemini-cli-mcp-client", "mcp-mux", "mem__read graph", "mcp_mcp-mux_mem__read_graph"},
		{"opencode", "mcp-mux", "mem__read.graph", "mcp-mux_mem__read_graph"},
		{"copilot-cli", "mcp-mux", "mem__read_graph", "mcp-mux-mem__read_graph"},
	} {
		if got := Of(c.client).ToolName(c.server, c.tool); got != c.want {
			t.Errorf("%s: %q", c.client, got)
		}
	}
}
