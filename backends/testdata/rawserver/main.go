// Command rawserver is a minimal MCP server on stdio, built by the backends
// tests. Unlike an SDK-based server it writes exactly the bytes a test asks
// for: responses with the id last (as the TypeScript SDK orders them),
// malformed envelopes, lines of any size, and huge stderr lines.
//
// Tools (tools/call):
//
//	pid     answers with its process id as text.
//	raw     writes each of arguments.lines to stdout, with %ID% replaced by
//	        the request's id and %PAD% by arguments.pad 'x' characters; then
//	        answers normally only if arguments.reply is true.
//	stderr  writes one line of arguments.bytes 'e' characters to stderr,
//	        then answers.
//
// With RAWSERVER_RESOURCES set, it also has resources: resources/list is
// answered with that variable's value as the result, as it is, and any
// URI reads as the text "raw". With RAWSERVER_TOOLS set (a JSON array),
// tools/list is answered with those tools, as they are.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string `json:"protocolVersion"`
		Name            string `json:"name"`
		URI             string `json:"uri"`
		Arguments       struct {
			Lines []string `json:"lines"`
			Pad   int      `json:"pad"`
			Reply bool     `json:"reply"`
			Bytes int      `json:"bytes"`
		} `json:"arguments"`
	} `json:"params"`
}

var (
	out       = bufio.NewWriter(os.Stdout)
	resources = os.Getenv("RAWSERVER_RESOURCES")
	tools     = os.Getenv("RAWSERVER_TOOLS")
)

func main() {
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			handle(line)
		}
		if err != nil {
			os.Exit(0)
		}
	}
}

func handle(line []byte) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		fmt.Fprintf(os.Stderr, "rawserver: bad request: %v\n", err)
		return
	}
	if len(req.ID) == 0 {
		return // a notification
	}
	switch req.Method {
	case "initialize":
		caps := map[string]any{"tools": map[string]any{}}
		if resources != "" {
			caps["resources"] = map[string]any{}
		}
		reply(req.ID, map[string]any{
			"protocolVersion": req.Params.ProtocolVersion,
			"capabilities":    caps,
			"serverInfo":      map[string]any{"name": "rawserver", "version": "0"},
		})
	case "tools/list":
		if tools != "" {
			write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":%s}}`, req.ID, tools))
		} else {
			reply(req.ID, map[string]any{"tools": []any{}})
		}
	case "resources/read":
		reply(req.ID, map[string]any{"contents": []any{map[string]any{"uri": req.Params.URI, "text": "raw"}}})
	case "resources/list", "resources/templates/list":
		if resources == "" {
			write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, req.ID))
		} else if req.Method == "resources/list" {
			write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, resources))
		} else {
			reply(req.ID, map[string]any{"resourceTemplates": []any{}})
		}
	case "ping":
		reply(req.ID, map[string]any{})
	case "tools/call":
		call(&req)
	default:
		write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, req.ID))
	}
}

func call(req *request) {
	a := req.Params.Arguments
	switch req.Params.Name {
	case "pid":
		reply(req.ID, text(strconv.Itoa(os.Getpid())))
	case "raw":
		pad := strings.Repeat("x", max(a.Pad, 0))
		for _, l := range a.Lines {
			write(strings.NewReplacer("%ID%", string(req.ID), "%PAD%", pad).Replace(l))
		}
		if a.Reply {
			reply(req.ID, text("ok"))
		}
	case "stderr":
		line := append(bytes.Repeat([]byte("e"), max(a.Bytes, 0)), '\n')
		if _, err := os.Stderr.Write(line); err != nil {
			os.Exit(4)
		}
		reply(req.ID, text("ok"))
	default:
		write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unknown tool"}}`, req.ID))
	}
}

func text(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
}

func reply(id json.RawMessage, result any) {
	data, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	if err != nil {
		panic(err)
	}
	write(string(data))
}

func write(line string) {
	out.WriteString(line)
	out.WriteByte('\n')
	if err := out.Flush(); err != nil {
		os.Exit(5)
	}
}
