//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reqTimeout bounds every request the benchmark sends.
const reqTimeout = 10 * time.Second

// client is one agent session with a process under test.
type client struct {
	p  *proc
	cs *mcp.ClientSession
	tr *http.Transport // over HTTP, the session's own connections (http.go)

	updateURI   atomic.Pointer[string]
	updates     atomic.Int64
	lastUpdate  atomic.Int64 // UnixNano of the last counted update
	listChanged chan struct{}
}

// connect initializes a session (protocol 2025-11-25, so the bare fixture
// is never sent the server/discover probe). A process that does not
// answer within reqTimeout is killed, which ends the wait.
func connect(ctx context.Context, p *proc) (*client, error) {
	return connectAt(ctx, p, "2025-11-25")
}

// connectAt is connect at protocol version, or, if version is "", in the
// current era (server/discover, then _meta on every request).
func connectAt(ctx context.Context, p *proc, version string) (*client, error) {
	return connectWithin(ctx, p, version, reqTimeout)
}

// connectWithin is connectAt, the process killed if it has not answered
// within timeout.
func connectWithin(ctx context.Context, p *proc, version string, timeout time.Duration) (*client, error) {
	c := &client{p: p, listChanged: make(chan struct{}, 1)}
	watchdog := time.AfterFunc(timeout, p.kill)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcp-mux-bench", Version: "0"}, c.options()).Connect(ctx,
		&mcp.IOTransport{Reader: p.stdout, Writer: p.stdin}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if !watchdog.Stop() && err == nil {
		err = errors.New("initialize took longer than " + timeout.String())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: initialize: %w\n%s stderr (last lines):\n%s", p.mode, err, p.mode, p.logTail(20))
	}
	c.cs = cs
	return c, nil
}

// options are the client's: it counts the updates of updateURI and is told
// of tools/list changes.
func (c *client) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if u := c.updateURI.Load(); u != nil && req.Params != nil && req.Params.URI == *u {
				c.updates.Add(1)
				c.lastUpdate.Store(time.Now().UnixNano())
			}
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.listChanged <- struct{}{}:
			default:
			}
		},
	}
}

func (p *proc) kill() { _ = p.cmd.Process.Kill() }

// close ends the session and the process (bounded).
func (c *client) close() {
	done := make(chan struct{})
	go func() {
		_ = c.cs.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.p.kill() // its pipes close, which ends cs.Close
	}
	c.p.stop(5 * time.Second)
}

// fail wraps err with the mode and the tail of the process's stderr. A
// request that was never answered is worth more than its timeout: the
// process and everything below it (all Go programs) are asked for their
// goroutines first, and the log that holds them is kept.
func (c *client) fail(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		if kept := c.p.dumpGoroutines(); kept != "" {
			what += " (goroutine dumps: " + kept + ")"
		}
	}
	return fmt.Errorf("%s: %s: %w\n%s stderr (last lines):\n%s", c.p.mode, what, err, c.p.mode, c.p.logTail(20))
}

// dumpGoroutines sends SIGQUIT to p's descendants, then to p (a Go
// program prints every goroutine's stack to stderr and exits), and copies
// p's stderr log out of the temporary directory; it returns the copy's
// path. p's own log has the backends' stderr, relayed by mcp-mux.
func (p *proc) dumpGoroutines() string {
	pid := p.cmd.Process.Pid
	for _, d := range descendants(pid) {
		if dp, err := os.FindProcess(d.pid); err == nil {
			_ = dp.Signal(syscall.SIGQUIT)
		}
	}
	time.Sleep(500 * time.Millisecond) // for mcp-mux to relay them
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.waited:
	case <-time.After(2 * time.Second):
	}
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	kept := filepath.Join(os.TempDir(), fmt.Sprintf("mcp-mux-bench-unanswered-%d.log", pid))
	if os.WriteFile(kept, data, 0o644) != nil {
		return ""
	}
	return kept
}

func (c *client) readResource(ctx context.Context, uri string) error {
	ctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	res, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err == nil && (len(res.Contents) != 1 || res.Contents[0].Text == "") {
		err = fmt.Errorf("unexpected contents %+v", res.Contents)
	}
	if err != nil {
		return c.fail("resources/read "+uri, err)
	}
	return nil
}

var echoArgs = map[string]any{"hello": "world"}

func (c *client) callTool(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err == nil && res.IsError {
		err = fmt.Errorf("tool error %+v", res.Content)
	}
	if err != nil {
		return nil, c.fail("tools/call "+name, err)
	}
	return res, nil
}

// allTools lists every page of tools.
func (c *client) allTools(ctx context.Context) ([]string, error) {
	var names []string
	cursor := ""
	for {
		rctx, cancel := context.WithTimeout(ctx, reqTimeout)
		res, err := c.cs.ListTools(rctx, &mcp.ListToolsParams{Cursor: cursor})
		cancel()
		if err != nil {
			return nil, c.fail("tools/list", err)
		}
		for _, t := range res.Tools {
			names = append(names, t.Name)
		}
		if cursor = res.NextCursor; cursor == "" {
			return names, nil
		}
	}
}

// waitFullTools lists tools until every name in want is there: mux may
// serve a list before every backend is in it, and tells list_changed.
func (c *client) waitFullTools(ctx context.Context, want []string) (lists int, err error) {
	return c.waitFullToolsWithin(ctx, want, 30*time.Second)
}

// waitFullToolsWithin is waitFullTools giving up after d.
func (c *client) waitFullToolsWithin(ctx context.Context, want []string, d time.Duration) (lists int, err error) {
	deadline := time.Now().Add(d)
	for {
		names, err := c.allTools(ctx)
		lists++
		if err != nil {
			return lists, err
		}
		missing := 0
		for _, w := range want {
			if !slices.Contains(names, w) {
				missing++
			}
		}
		if missing == 0 {
			return lists, nil
		}
		if time.Now().After(deadline) {
			return lists, c.fail("waiting for a full tools/list", fmt.Errorf("%d of %d tools still missing after %d lists", missing, len(want), lists))
		}
		select {
		case <-c.listChanged:
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return lists, ctx.Err()
		}
	}
}

// allResources lists every page of resources.
func (c *client) allResources(ctx context.Context) (n, pages int, err error) {
	cursor := ""
	for {
		rctx, cancel := context.WithTimeout(ctx, reqTimeout)
		res, err := c.cs.ListResources(rctx, &mcp.ListResourcesParams{Cursor: cursor})
		cancel()
		if err != nil {
			return n, pages, c.fail("resources/list", err)
		}
		n += len(res.Resources)
		pages++
		if cursor = res.NextCursor; cursor == "" {
			return n, pages, nil
		}
	}
}

// toolName is the fixture's tool as the agent sees it in mode m.
func toolName(m mode, fixture, tool string) string {
	switch {
	case m.isMux():
		return fixture + "__" + tool
	case m == mcpmu:
		return fixture + "." + tool
	}
	return tool
}
