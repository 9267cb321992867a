package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// TestServeHTTPThreadsFollowTheLoad: serve --http runs on one thread while
// idle and while one agent calls, as status shows; eight agents calling at
// once, of both eras, give it more, and it is back on one once they stop
// (mux/cores).
func TestServeHTTPThreadsFollowTheLoad(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: serve --http has one thread to run on")
	}
	statusDir(t)
	t.Setenv("GOMAXPROCS", "") // the test's own, if any, is not mcp-mux's
	// On this 2-core machine the agents and the backend take most of the
	// CPU, and one thread keeps up with mcp-mux's part (cores.SaturatedAt):
	// a lower bar shows the rule at work.
	t.Setenv("MCP_MUX_SATURATED_AT", "0.05")
	os.Unsetenv("GOMAXPROCS")
	// The load is tool searches over a catalog of hundreds of tools:
	// mcp-mux's own work, enough to keep its one thread busy (echo calls
	// through it on this 2-core machine took a quarter of a core, the
	// agents and the backend the rest: no load that needs more threads).
	catalog, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "toolsearch", "catalog.json"))
	h := startHTTPMux(t, testkit.WriteConfig(t, `tool_list = "search"`, []string{"f", "-name", "f", "-catalog", catalog}))
	threads := func() float64 {
		t.Helper()
		js, _, code := runStatus(t, "--json", "--pid", strconv.Itoa(h.cmd.Process.Pid))
		var doc struct {
			Processes []map[string]any `json:"processes"`
		}
		if code != 0 || json.Unmarshal([]byte(js), &doc) != nil || len(doc.Processes) != 1 {
			t.Fatalf("status --json: exit %d\n%s", code, js)
		}
		n, _ := doc.Processes[0]["threads"].(float64)
		return n
	}
	call := func(ctx context.Context, cs *mcp.ClientSession) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "create an issue in a repository and list its pull requests"}})
		if err == nil && res.IsError {
			t.Errorf("call: %+v", res)
		}
		return err
	}
	var css []*mcp.ClientSession
	for i := range 8 {
		opts := &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
		if i%2 == 0 {
			opts = nil // the current era
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "threads-e2e", Version: "1"}, nil).Connect(testkit.CtxT(t),
			&mcp.StreamableClientTransport{Endpoint: h.url, DisableStandaloneSSE: true}, opts)
		if err != nil {
			t.Fatalf("connect: %v\nstderr:\n%s", err, h.stderr)
		}
		t.Cleanup(func() { cs.Close() })
		css = append(css, cs)
	}
	if n := threads(); n != 1 {
		t.Fatalf("idle with eight sessions open: %v threads, want 1", n)
	}

	// One agent calling back to back is one agent's work.
	ctx, cancel := context.WithTimeout(testkit.CtxT(t), 700*time.Millisecond)
	for ctx.Err() == nil {
		if err := call(ctx, css[0]); err != nil && ctx.Err() == nil {
			t.Fatalf("call: %v", err)
		}
	}
	cancel()
	if n := threads(); n != 1 {
		t.Errorf("after 0.7 s of one agent's calls: %v threads, want 1", n)
	}

	ctx, cancel = context.WithCancel(testkit.CtxT(t))
	var wg sync.WaitGroup
	for _, cs := range css {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := call(ctx, cs); err != nil && ctx.Err() == nil {
					t.Errorf("call under load: %v", err)
					return
				}
			}
		})
	}
	var most float64
	raised := testkit.Poll(10*time.Second, func() bool { most = threads(); return most > 1 })
	cancel()
	wg.Wait()
	if !raised {
		t.Fatalf("eight agents calling at once for 10 s: still %v thread(s), want more than 1", most)
	}
	if !testkit.Poll(10*time.Second, func() bool { return threads() == 1 }) {
		t.Errorf("10 s after the load: %v threads, want 1", threads())
	}
}
