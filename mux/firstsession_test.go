package mux

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The first session of serve --http: its backends started before any
// agent, and the first agent declares roots (the go-sdk client does by
// default). No call fails for mux's own bookkeeping: the backend, told at
// its start every capability mux forwards, is not restarted, and the
// agent's roots reach it.
func TestTheFirstHTTPSessionsCallsNeverFail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    *mcp.ClientOptions
		restart bool // what the agent has was not declared: the backend restarts
	}{
		{"roots", nil, false},
		// An extension mux cannot know before the agent: the backend is
		// restarted with it, and the calls wait for the new process.
		{"an extension", &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}, Extensions: map[string]any{"io.example/ext": map[string]any{}}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) { firstSessionCalls(t, tc.opts, tc.restart) })
	}
}

func firstSessionCalls(t *testing.T, opts *mcp.ClientOptions, restart bool) {
	m := New(testConfig(fixture(t, "fx", "-client-requests")), testLogger(t), "test")
	m.agent.wait = 50 * time.Millisecond // no agent comes while backends start: serve --http
	m.Start()
	t.Cleanup(m.Close)
	testkit.Eventually(t, 10*time.Second, "the backend ready before any agent", func() bool { return m.Status()[0].Ready() })
	pid := m.Status()[0].PID
	url := serveHTTP(t, m, door.HTTPOptions{SessionIdle: time.Minute})

	c := mcp.NewClient(&mcp.Implementation{Name: "go-agent", Version: "1"}, opts) // nil: declares roots
	cs, err := c.Connect(testkit.CtxT(t), &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// Calls at once, from several goroutines, while the agent's
	// capabilities reach mux.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				text := fmt.Sprintf("g%d-%d", g, i)
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": text}})
				if err != nil || res.IsError {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("%s: %v %v", text, err, res))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of 320 calls failed, e.g. %s", len(failed), failed[0])
	}
	if restart {
		testkit.Eventually(t, 10*time.Second, "the backend restarted with the agent's extension", func() bool {
			st := m.Status()[0]
			return st.PID != pid && st.State == stateReady
		})
	} else if st := m.Status()[0]; st.PID != pid || st.State != stateReady {
		t.Errorf("the backend was restarted for the agent: pid %d (was %d), %s", st.PID, pid, st.State)
	}
	if ci := fixtureClientInfo(t, cs, "fx__client_info"); ci.Capabilities["roots"] == nil {
		t.Errorf("the backend was not told roots: %v", ci.Capabilities)
	}
}
