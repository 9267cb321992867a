// Package agents is what mcp-mux knows of each agent (MCP client) it may
// serve, found by the clientInfo name the agent sends: how the agent names
// an MCP server's tools for its model and where it cuts them, how many
// tools it takes, whether it lists them again on tools/list_changed, and
// how long it waits for a server before its first model request. Each fact
// is measured from the agent (the end-to-end suite in testdata/agents) or
// taken from its documentation; the README's agent table says which.
package agents

import (
	"strings"
	"time"
)

// Agent is one agent's rules. The zero Agent is an unknown agent: it is
// assumed to list again on list_changed, with no limit of its own.
type Agent struct {
	// Name is the agent's name in the README's table and in mcp-mux's logs.
	Name string
	// Match is a substring of the clientInfo name (case folded) that
	// identifies the agent.
	Match string

	// Searches: it searches the tool list itself (its list may hold every
	// tool).
	Searches bool
	// MaxTools is the most tools it takes (0: no limit known).
	MaxTools int
	// SmallList: the small list (search_tools and the wrappers) is chosen
	// for it on purpose past [mux] tool_list_max tools, though it could
	// take them all; every other agent gets every tool up to its MaxTools.
	SmallList bool
	// ListChanged: it asks for the list again on tools/list_changed.
	ListChanged bool
	// Relists: it is known to list again on tools/list_changed before its
	// model's next request, so a tool that joins the list can be called by
	// its own name, where its own approval and permission rules apply. An
	// agent that does not (or is not known to) reaches what it found
	// through the wrappers, which must then run it.
	Relists bool

	// ToolName is the name the agent gives its model for the tool named
	// tool of the server it registered as server (nil: not known).
	ToolName func(server, tool string) string
	// NameLimit is the most characters of ToolName's result that reach the
	// model intact (0: none known); Past says what happens to a longer one.
	NameLimit int
	Past      Past

	// Patience is how long it waits for a server before its first model
	// request; 0: not known. Waits: it waits for every server it started
	// (up to Patience, if known) before that request; an agent that does
	// not wait sends its first request with whatever answered by then.
	Patience time.Duration
	Waits    bool
}

// Past is what an agent does with a tool name over its NameLimit.
type Past string

const (
	// Cut: the name is cut to its first NameLimit characters.
	Cut Past = "cut"
	// Elide: the name becomes its first and last characters around "...".
	Elide Past = "elide"
	// Rejected: the name goes to the model API as it is, which rejects
	// the whole request (OpenAI's ^[a-zA-Z0-9_-]{1,64}$).
	Rejected Past = "rejected"
)

// Known is every agent mcp-mux has rules for, matched in order.
var Known = []Agent{
	{
		Name: "Claude Code", Match: "claude-code",
		Searches: true, ListChanged: true, Relists: true,
		ToolName: func(server, tool string) string { return "mcp__" + server + "__" + tool },
		// It sends any name, but its ToolSearch refers to a tool by name, and
		// Anthropic's API refuses such a reference past 64 characters.
		NameLimit: 64, Past: Rejected,
		Patience: 5 * time.Second, Waits: true, // MCP_CONNECT_TIMEOUT_MS
	},
	{
		// Relists: no; a tool that search_tools found (announced with
		// list_changed) was in none of the turn's later model requests.
		Name: "Codex CLI", Match: "codex",
		ListChanged: true,
		// One namespace per server (mcp__SERVER); the model calls the tool by
		// its own name inside it, to which OpenAI's rule applies.
		ToolName:  func(_, tool string) string { return strings.ReplaceAll(sanitize(tool, false), "-", "_") },
		NameLimit: 64, Past: Rejected,
		// mcp_optional_startup_grace_ms (default 1000): a server that has
		// not listed its tools by then is not in the first request.
		Patience: time.Second,
	},
	{
		// Relists: no; a tool that joined the list on list_changed did not
		// reach its model's later requests of the same turn.
		Name: "Gemini CLI", Match: "gemini-cli",
		ListChanged: true,
		ToolName:    func(server, tool string) string { return "mcp_" + sanitize(server, true) + "_" + sanitize(tool, true) },
		NameLimit:   63, Past: Elide,
		Waits: true,
	},
	{
		// Relists: no; it acts on list_changed one model request late.
		Name: "opencode", Match: "opencode",
		ListChanged: true,
		ToolName:    func(server, tool string) string { return sanitize(server, false) + "_" + sanitize(tool, false) },
		NameLimit:   64, Past: Rejected, // it cuts nothing: the model API's rule is the limit
		Waits: true,
	},
	{
		Name: "Copilot CLI", Match: "copilot",
		ListChanged: true, Relists: true,
		ToolName:  func(server, tool string) string { return server + "-" + tool },
		NameLimit: 64, Past: Cut,
		Waits: true,
	},
	{Name: "Cursor", Match: "cursor", MaxTools: 40, ListChanged: true, Relists: true},
	{Name: "Windsurf", Match: "windsurf", MaxTools: 100, ListChanged: true, Relists: true},
	{Name: "VS Code", Match: "visual studio code", MaxTools: 128, ListChanged: true, Relists: true},
	// Claude Desktop: the small list is chosen for it on purpose (mcp-mux
	// issue 23); it ignores list_changed, so the wrappers run what it found.
	{Name: "Claude Desktop", Match: "claude-ai", SmallList: true},
}

// Of is the agent whose clientInfo name is client (the zero Agent, with
// ListChanged, if none is known).
func Of(client string) Agent {
	name := strings.ToLower(client)
	for _, a := range Known {
		if strings.Contains(name, a.Match) {
			return a
		}
	}
	return Agent{ListChanged: true}
}

// Known reports whether a is one of Known.
func (a Agent) Known() bool { return a.Match != "" }

// sanitize replaces what an agent does not keep of a name: characters
// outside [a-zA-Z0-9_-], and with dots also '.' and ':' kept (Gemini CLI).
func sanitize(s string, dots bool) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		case dots && (r == '.' || r == ':'):
			return r
		}
		return '_'
	}, s)
}
