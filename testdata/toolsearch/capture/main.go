// Command capture runs mcp-mux over the 20 MCP servers of the tool-search
// measurement (testdata/toolsearch/mcp-mux.toml, installed by setup.sh) and
// writes what an agent gets: every tool of tools/list exactly as sent, with
// its backend, and each backend's server name and instructions. The
// evaluation and benchmarks of mux/search read that file, so they run
// without npm.
//
//	go run ./testdata/toolsearch/capture [-out testdata/toolsearch/catalog.json] [-check]
//
// -check compares what the servers list now with the committed file and
// fails on a difference instead of writing it. Without the npm packages it
// says so and exits 0: CI never installs them.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Catalog is catalog.json.
type Catalog struct {
	Note     string    `json:"note"`
	Backends []Backend `json:"backends"`
	Tools    []Tool    `json:"tools"`
}

// Backend is one configured server as mcp-mux saw it.
type Backend struct {
	Name         string `json:"name"`
	Package      string `json:"package"`
	Server       string `json:"server"` // serverInfo name and version (mcp-mux://backends)
	Instructions string `json:"instructions,omitempty"`
}

// Tool is one tool of tools/list as sent, with the backend it came from.
type Tool struct {
	Backend string          `json:"backend"`
	Tool    json.RawMessage `json:"tool"`
}

// packages maps each backend of mcp-mux.toml to its npm package.
var packages = map[string]string{
	"filesystem":      "@modelcontextprotocol/server-filesystem",
	"memory":          "@modelcontextprotocol/server-memory",
	"github":          "@modelcontextprotocol/server-github",
	"gitlab":          "@modelcontextprotocol/server-gitlab",
	"postgres":        "@modelcontextprotocol/server-postgres",
	"puppeteer":       "@modelcontextprotocol/server-puppeteer",
	"google-maps":     "@modelcontextprotocol/server-google-maps",
	"brave":           "@modelcontextprotocol/server-brave-search",
	"slack":           "@modelcontextprotocol/server-slack",
	"notion":          "@notionhq/notion-mcp-server",
	"cloudflare":      "@cloudflare/mcp-server-cloudflare",
	"playwright":      "@playwright/mcp",
	"ea-playwright":   "@executeautomation/playwright-mcp-server",
	"chrome-devtools": "chrome-devtools-mcp",
	"firecrawl":       "firecrawl-mcp",
	"tavily":          "tavily-mcp",
	"exa":             "exa-mcp-server",
	"supabase":        "@supabase/mcp-server-supabase",
	"context7":        "@upstash/context7-mcp",
	"azure":           "@azure/mcp",
}

func main() {
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Dir(filepath.Dir(self)) // testdata/toolsearch
	out := flag.String("out", filepath.Join(dir, "catalog.json"), "where to write the catalog")
	check := flag.Bool("check", false, "compare with the committed catalog instead of writing it")
	flag.Parse()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin")); err != nil {
		fmt.Fprintf(os.Stderr, "capture: skipped: the servers are not installed (run %s first)\n", filepath.Join(dir, "setup.sh"))
		return
	}
	if err := run(dir, *out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "capture:", err)
		os.Exit(1)
	}
}

func run(dir, out string, check bool) error {
	tmp, err := os.MkdirTemp("", "toolsearch-capture")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "mcp-mux")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(dir, "..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building mcp-mux: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	config := filepath.Join(dir, "mcp-mux.toml")
	c, stop, err := start(ctx, bin, config)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := c.initialize(); err != nil {
		return err
	}
	var tools []json.RawMessage
	cursor := ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := c.call("tools/list", params, &page); err != nil {
			return err
		}
		tools = append(tools, page.Tools...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	var res struct {
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	}
	if err := c.call("resources/read", map[string]any{"uri": "mcp-mux://backends"}, &res); err != nil {
		return err
	}
	if len(res.Contents) != 1 {
		return errors.New("mcp-mux://backends: not one content")
	}
	var status struct {
		Backends []struct {
			Name, State, Server string
			Tools               int
		} `json:"backends"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &status); err != nil {
		return fmt.Errorf("mcp-mux://backends: %w", err)
	}

	// mcp-mux's initialize waits about one backend start for the
	// backends' instructions, and remembers those it got for the next run
	// (mux/instrcache.go): a second session, now that every backend has
	// started once, has them all.
	stop()
	c2, stop2, err := start(ctx, bin, config)
	if err != nil {
		return err
	}
	instructions, err := c2.initialize()
	stop2()
	if err != nil {
		return err
	}

	cat := &Catalog{Note: "Written by `go run ./testdata/toolsearch/capture` (mcp-mux over the servers of package.json, config mcp-mux.toml): every tool of tools/list as sent, in its order, with its backend; each backend's serverInfo name and version and its own instructions."}
	var names []string
	for _, b := range status.Backends {
		names = append(names, b.Name)
	}
	for _, b := range status.Backends {
		if b.State != "ready" {
			return fmt.Errorf("backend %s is %s, not ready", b.Name, b.State)
		}
		cat.Backends = append(cat.Backends, Backend{Name: b.Name, Package: packages[b.Name], Server: b.Server,
			Instructions: section(instructions, b.Name, names)})
	}
	for _, t := range tools {
		var head struct{ Name string }
		if err := json.Unmarshal(t, &head); err != nil {
			return err
		}
		prefix, _, ok := strings.Cut(head.Name, "__")
		if !ok || !slices.ContainsFunc(cat.Backends, func(b Backend) bool { return b.Name == prefix }) {
			return fmt.Errorf("tool %q: no backend's prefix", head.Name)
		}
		cat.Tools = append(cat.Tools, Tool{Backend: prefix, Tool: t})
	}
	data, err := json.MarshalIndent(cat, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	fmt.Fprintf(os.Stderr, "capture: %d backends, %d tools\n", len(cat.Backends), len(cat.Tools))
	if check {
		old, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		if !bytes.Equal(old, data) {
			return fmt.Errorf("%s differs from what the servers list now: rerun without -check to update it", out)
		}
		return nil
	}
	return os.WriteFile(out, data, 0o644)
}

// section is the part of mcp-mux's merged instructions that is backend
// name's own: after its header (mux/instructions.go), up to the next
// backend's header or the list of servers not running.
func section(all, name string, names []string) string {
	header := func(n string) string { return "\n\n## " + n + " (tools and prompts prefixed `" + n + "__`)\n\n" }
	i := strings.Index(all, header(name))
	if i < 0 {
		return ""
	}
	rest := all[i+len(header(name)):]
	end := len(rest)
	for _, n := range names {
		if k := strings.Index(rest, strings.TrimSuffix(header(n), "\n\n")); k >= 0 {
			end = min(end, k)
		}
	}
	if k := strings.Index(rest, "\n\n## Servers that are not running"); k >= 0 {
		end = min(end, k)
	}
	return strings.TrimSpace(rest[:end])
}

// start runs mcp-mux with config; stop closes its stdin and waits for it.
func start(ctx context.Context, bin, config string) (c *client, stop func(), err error) {
	cmd := exec.CommandContext(ctx, bin, "--config", config)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	var once sync.Once
	return &client{w: stdin, r: bufio.NewReaderSize(stdout, 1<<20)}, func() { once.Do(func() { stdin.Close(); cmd.Wait() }) }, nil
}

// initialize starts the session and returns mcp-mux's instructions.
func (c *client) initialize() (string, error) {
	var init struct {
		Instructions string `json:"instructions"`
	}
	if err := c.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "toolsearch-capture", "version": "1"}}, &init); err != nil {
		return "", err
	}
	return init.Instructions, c.notify("notifications/initialized")
}

// client speaks newline-delimited JSON-RPC to mcp-mux on its stdio.
type client struct {
	w      io.Writer
	r      *bufio.Reader
	nextID int
}

func (c *client) notify(method string) error {
	_, err := fmt.Fprintf(c.w, `{"jsonrpc":"2.0","method":%q}`+"\n", method)
	return err
}

func (c *client) call(method string, params, result any) error {
	c.nextID++
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": params})
	if err != nil {
		return err
	}
	if _, err := c.w.Write(append(req, '\n')); err != nil {
		return err
	}
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		var msg struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if msg.Method != "" {
			if msg.ID != nil { // a request of the server's (roots/list, ...): refuse it
				fmt.Fprintf(c.w, `{"jsonrpc":"2.0","id":%d,"error":{"code":-32601,"message":"not supported"}}`+"\n", *msg.ID)
			}
			continue
		}
		if msg.ID == nil || *msg.ID != c.nextID {
			continue
		}
		if msg.Error != nil {
			return fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		return json.Unmarshal(msg.Result, result)
	}
}
