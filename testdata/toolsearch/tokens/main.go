// Command tokens counts the cl100k tokens of tools/list for the 20 servers
// of the tool-search measurement, in each tool_list mode: "all" (the result
// the agent gets with every tool of catalog.json, as sent) and "search"
// (search_tools and call_tool, as mux/search defines them). The count is
// gpt-tokenizer's cl100k_base (pinned in package.json; tokens.mjs), over
// the compact JSON of the tools/list result.
//
//	go run ./testdata/toolsearch/tokens
//
// It needs Node.js and testdata/toolsearch/node_modules (setup.sh, or npm
// ci there); without them it says so and exits 0.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/mcp-mux/mcp-mux/mux/search"
)

func main() {
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Dir(filepath.Dir(self))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "gpt-tokenizer")); err != nil {
		fmt.Fprintln(os.Stderr, "tokens: skipped: gpt-tokenizer is not installed (run npm ci in testdata/toolsearch)")
		return
	}
	if _, err := exec.LookPath("node"); err != nil {
		fmt.Fprintln(os.Stderr, "tokens: skipped: no node")
		return
	}
	if err := run(dir); err != nil {
		fmt.Fprintln(os.Stderr, "tokens:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "catalog.json"))
	if err != nil {
		return err
	}
	var cat struct {
		Tools []struct {
			Tool json.RawMessage `json:"tool"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(data, &cat); err != nil {
		return err
	}
	all := make([]json.RawMessage, len(cat.Tools))
	for i, t := range cat.Tools {
		var b bytes.Buffer
		if err := json.Compact(&b, t.Tool); err != nil {
			return err
		}
		all[i] = b.Bytes()
	}
	var defs []json.RawMessage
	if err := json.Unmarshal(search.ToolDefinitions(), &defs); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "toolsearch-tokens")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	modes := []struct {
		name  string
		tools []json.RawMessage
	}{{"all", all}, {"search", defs}}
	var files []string
	for _, m := range modes {
		result, err := json.Marshal(map[string]any{"tools": m.tools})
		if err != nil {
			return err
		}
		f := filepath.Join(tmp, m.name+".json")
		if err := os.WriteFile(f, result, 0o644); err != nil {
			return err
		}
		files = append(files, f)
	}
	cmd := exec.Command("node", append([]string{filepath.Join(dir, "tokens.mjs")}, files...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("node tokens.mjs: %w", err)
	}
	var counts map[string]int
	if err := json.Unmarshal(out, &counts); err != nil {
		return err
	}
	fmt.Println("| tool_list mode | tools | bytes | tokens (cl100k) |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	for i, m := range modes {
		st, err := os.Stat(files[i])
		if err != nil {
			return err
		}
		fmt.Printf("| %s | %d | %d | %d |\n", m.name, len(m.tools), st.Size(), counts[files[i]])
	}
	return nil
}
