package e2e

import (
	"context"
	"encoding/json"
	"os"
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
	// One thread keeps up with mcp-mux's part of any load this test can
	// make on a small machine shared with the agents, the backend and other
	// tests (cores.SaturatedAt, which mux/cores's tests check): with the bar
	// set aside, what is seen is the rest of the rule at work.
	t.Setenv("MCP_MUX_SATURATED_AT", "0.001")
	os.Unsetenv("GOMAXPROCS")
	h := startHTTPMux(t, testkit.WriteConfig(t, "", []string{"f", "-name", "f"}))
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
		// Calls of 20 ms: eight agents keep several in flight however
		// slowly the machine runs them.
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__sleep", Arguments: map[string]any{"ms": 20}})
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
