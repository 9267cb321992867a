package search

import "encoding/json"

// The search surface: the two tools an agent gets in place of the whole
// catalog when tool_list is "search". Their definitions live here, next to
// the engine they describe, so that what the server lists and what the
// token count measures (testdata/toolsearch/tokens) are the same bytes.

const (
	// SearchToolName finds tools: {"query": string, "limit"?: integer, "backend"?: string}.
	SearchToolName = "search_tools"
	// CallToolName calls one: {"name": string, "arguments"?: object}.
	CallToolName = "call_tool"
	// DefaultLimit is how many tools search_tools returns when limit is absent.
	DefaultLimit = 5
	// MaxLimit is the most it returns; a larger limit is this.
	MaxLimit = 20
)

// toolDefinitions is the JSON of both tools, as tools/list sends them.
const toolDefinitions = `[
{"name":"search_tools","title":"Search tools",
"description":"Find the tools for a task among the tools of every MCP server behind this one; they are not listed until found. Say what you want to do in a few words, as you would ask a colleague (\"create an issue on GitLab\", \"screenshot of the page with Playwright\", \"latitude and longitude of an address\"); naming the server helps, and a tool's exact name finds it. Returns the best matches first, each with its name, description and input schema, to call with call_tool. If none fits, search again in other words.",
"inputSchema":{"type":"object","properties":{
"query":{"type":"string","description":"What you want to do, in a few words, or a tool's name."},
"limit":{"type":"integer","minimum":1,"maximum":20,"default":5,"description":"How many tools to return: 5 when absent, at most 20."},
"backend":{"type":"string","description":"Only tools of this server: its name, the part before __ of its tools' names."}},
"required":["query"],"additionalProperties":false},
"annotations":{"readOnlyHint":true,"openWorldHint":false}},
{"name":"call_tool","title":"Call a tool",
"description":"Call a tool that search_tools found, by its exact name, with arguments that follow its input schema. Returns that tool's own result.",
"inputSchema":{"type":"object","properties":{
"name":{"type":"string","description":"The tool's name as search_tools gave it, e.g. github__create_issue."},
"arguments":{"type":"object","description":"The tool's arguments, as its input schema says."}},
"required":["name"],"additionalProperties":false}}
]`

// ToolDefinitions returns the definitions of search_tools and call_tool, a
// JSON array of two MCP Tool objects (name, title, description,
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
