package mux

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// What go-sdk v1.8.0 does not model reaches the agent as the backend sent
// it: a tool's execution (tasks), x-mcp-header in its schema, extension
// keys in its _meta (MCP Apps' ui.resourceUri), fields newer than the
// go-sdk, and in a tool's result fields and content of kinds it does not
// know; in both eras, by both of mux's paths (the go-sdk's, before the
// first list, and the pass-through). A tool that must be called as a
// task (mux declares no tasks) fails a plain call with -32601.

const (
	appTool = `{"name":"show","description":"shows an app",` +
		`"inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"X-Region"}}},` +
		`"execution":{"taskSupport":"optional"},"_meta":{"ui":{"resourceUri":"ui://show/app.html"}},"futureField":{"a":[1,2.50]}}`
	taskTool = `{"name":"long","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`
	// What the raw tool answers: a result with a field and a content kind
	// the go-sdk has no type for.
	futureResult = `{"content":[{"type":"text","text":"t"},{"type":"hologram","frames":3}],"futureField":{"a":1}}`
)

func rawToolsBackend(t *testing.T) config.Backend {
	return config.Backend{Name: "raw", Command: testkit.RawServerBin(t),
		Env: map[string]string{"RAWSERVER_TOOLS": "[" + appTool + "," + taskTool + `,{"name":"raw","inputSchema":{"type":"object"}}]`}}
}

func TestFieldsTheGoSDKDoesNotModelReachTheAgent(t *testing.T) {
	for _, era := range []string{"handshake", "current"} {
		t.Run(era, func(t *testing.T) {
			m := startMux(t, rawToolsBackend(t))
			var a *rawAgent
			call := func(id int, method, params string) string {
				if era == "current" {
					return string(a.modernCall(id, method, params))
				}
				return string(a.call(id, method, params))
			}
			if era == "current" {
				a = newModernRawAgent(t, m)
			} else {
				a = newRawAgent(t, m)
			}
			// The call before any list takes the go-sdk's path; after it,
			// the pass-through.
			args, _ := json.Marshal(map[string]any{"lines": []string{`{"jsonrpc":"2.0","id":%ID%,"result":` + futureResult + `}`}})
			for i, path := range []string{"go-sdk", "pass-through"} {
				got := call(10+i, "tools/call", `{"name":"raw__raw","arguments":`+string(args)+`}`)
				for _, want := range []string{`{"type":"hologram","frames":3}`, `"futureField":{"a":1}`} {
					if !strings.Contains(got, want) {
						t.Errorf("%s: tools/call result %s\nlacks %s", path, got, want)
					}
				}
				if i == 0 {
					list := call(1, "tools/list", `{}`)
					want := strings.Replace(appTool, `"name":"show"`, `"name":"raw__show"`, 1)
					if !strings.Contains(list, want) {
						t.Errorf("tools/list %s\nlacks the tool as sent: %s", list, want)
					}
				}
			}
			got := call(20, "tools/call", `{"name":"raw__long","arguments":{}}`)
			if !strings.Contains(got, `"code":-32601`) || !strings.Contains(got, "task") {
				t.Errorf("plain call of a task-required tool: %s, want -32601 saying why", got)
			}
		})
	}
}

// The HTTP door lists and calls the same way.
func TestFieldsTheGoSDKDoesNotModelReachAnHTTPAgent(t *testing.T) {
	m := startMux(t, rawToolsBackend(t))
	url := serveHTTP(t, m, door.HTTPOptions{SessionIdle: time.Minute, MaxBody: 1 << 20})
	body, sid := postJSONRPC(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
	if !strings.Contains(body, "mcp-mux") {
		t.Fatalf("initialize: %s", body)
	}
	postJSONRPC(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	list, _ := postJSONRPC(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
	if want := strings.Replace(appTool, `"name":"show"`, `"name":"raw__show"`, 1); !strings.Contains(list, want) {
		t.Errorf("tools/list %s\nlacks the tool as sent: %s", list, want)
	}
	args, _ := json.Marshal(map[string]any{"lines": []string{`{"jsonrpc":"2.0","id":%ID%,"result":` + futureResult + `}`}})
	var p bytes.Buffer
	p.WriteString(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"raw__raw","arguments":`)
	p.Write(args)
	p.WriteString(`}}`)
	got, _ := postJSONRPC(t, url, sid, p.String())
	if !strings.Contains(got, `{"type":"hologram","frames":3}`) || !strings.Contains(got, `"futureField":{"a":1}`) {
		t.Errorf("tools/call over HTTP: %s", got)
	}
}
