package search

import "encoding/json"

// The search surface: the two tools an agent gets in place of the whole
// catalog when tool_list is "search". Their definitions live here, next to
// the engine they describe, so that what the server lists and what the
// token count measures (testdata/toolsearch/tokens) are the same bytes.

const (
	// SearchToolName finds tools: {"query": string, "limit"?: integer, "backend"?: string}.
	SearchToolName = "search_tools"
	// CallToolName calls one, whatever it does: {"name": string, "arguments"?: object}.
	CallToolName = "call_tool"
	// CallReadOnlyToolName calls one whose annotations say readOnlyHint:
	// {"name": string, "arguments"?: object}.
	CallReadOnlyToolName = "call_read_only_tool"
	// DefaultLimit is how many tools search_tools returns when limit is absent.
	DefaultLimit = 5
	// MaxLimit is the most it returns; a larger limit is this.
	MaxLimit = 20
)

// toolDefinitions is the JSON of the three tools, as tools/list sends them.
// An agent approves a tool by its name and its annotations (Claude Desktop's
// "always allow" is per tool), so each wrapper's annotations are the most
// it may run: call_read_only_tool is read-only and runs only read-only
// tools; call_tool says it may destroy and reach the outside world, because
// it may run a tool that does. Their descriptions say so to the model.
const toolDefinitions = `[
{"name":"search_tools","title":"Search tools",
"description":"Find the tools for a task among the tools of every MCP server behind this one; they are not listed until found. Say what you want to do in a few words, as you would ask a colleague (\"create an issue on GitLab\", \"screenshot of the page with Playwright\", \"latitude and longitude of an address\"); naming the server helps, and a tool's exact name finds it. Returns the best matches first, each with its name, description, input schema and annotations. If none fits, search again in other words.",
"inputSchema":{"type":"object","properties":{
"query":{"type":"string","description":"What you want to do, in a few words, or a tool's name."},
"limit":{"type":"integer","minimum":1,"maximum":20,"default":5,"description":"How many tools to return: 5 when absent, at most 20."},
"backend":{"type":"string","description":"Only tools of this server: its name, the part before __ of its tools' names."}},
"required":["query"],"additionalProperties":false},
"annotations":{"readOnlyHint":true,"openWorldHint":false}},
{"name":"call_read_only_tool","title":"Call a read-only tool",
"description":"Call a tool that search_tools found and whose annotations say readOnlyHint: true, by its exact name, with arguments that follow its input schema. Returns that tool's own result. It runs only read-only tools: a tool that may change anything is refused (use call_tool for it). A tool already in your tool list is called by its own name, not through this one.",
"inputSchema":{"type":"object","properties":{
"name":{"type":"string","description":"The tool's name as search_tools gave it, e.g. github__get_issue."},
"arguments":{"type":"object","description":"The tool's arguments, as its input schema says."}},
"required":["name"],"additionalProperties":false},
"annotations":{"readOnlyHint":true,"openWorldHint":true}},
{"name":"call_tool","title":"Call any tool",
"description":"Call a tool that search_tools found, by its exact name, with arguments that follow its input schema. Returns that tool's own result. It runs ANY tool, including tools that change or delete data or act on outside systems, so approving it approves all of them: for a tool whose annotations say readOnlyHint: true, use call_read_only_tool instead. A tool already in your tool list is called by its own name, not through this one.",
"inputSchema":{"type":"object","properties":{
"name":{"type":"string","description":"The tool's name as search_tools gave it, e.g. github__create_issue."},
"arguments":{"type":"object","description":"The tool's arguments, as its input schema says."}},
"required":["name"],"additionalProperties":false},
"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true}}
]`

// ToolDefinitions returns the definitions of search_tools,
// call_read_only_tool and call_tool, a JSON array of three MCP Tool objects (name, title, description,
// inputSchema, annotations), compact. Each call returns a new copy.
func ToolDefinitions() json.RawMessage {
	var v []json.RawMessage
	if err := json.Unmarshal([]byte(toolDefinitions), &v); err != nil {
		panic("search: the tool definitions are not JSON: " + err.Error())
	}
	out, err := json.Marshal(v) // compact
	if err != nil {
		panic(err)
	}
	return out
}
