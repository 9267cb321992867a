package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The agent's capabilities reach the backends of mcp-mux run as the agent
// runs it: its initialize arrives while the backends boot, and the first
// tools/list already shows what the backend offers such a client; the
// backend's requests come back over stdio.
func TestAgentCapabilitiesReachBackendsThroughTheBinary(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"ev", "-name", "ev", "-client-requests"})
	cmd := exec.Command(testkit.MuxBin(t), "--config", cfg)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		CreateMessageWithToolsHandler: func(_ context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			return &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: "m", Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///e2e"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: nopClose{stdin}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start to first tools/list: %s", time.Since(start))
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "ev__gated_sampling") || !slices.Contains(names, "ev__gated_roots") || slices.Contains(names, "ev__gated_elicitation") {
		t.Fatalf("first tools/list %v: want the sampling and roots tools, not the elicitation one", names)
	}
	for tool, want := range map[string]string{"ev__sample": "pong model=m", "ev__ask_roots": "file:///e2e"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"prompt": "ping"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != want {
			t.Fatalf("%s: got %q, want %q", tool, got, want)
		}
	}
}

func TestCheckConnectTellsBackendsNoClientCapabilities(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"ev", "-name", "ev", "-client-requests"})
	start := time.Now()
	out, code := runCheck(t, "--connect", "--json", "--config", cfg)
	took := time.Since(start)
	var rep struct {
		Backends []struct {
			Tools int `json:"tools"`
		} `json:"backends"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || len(rep.Backends) != 1 {
		t.Fatalf("check (exit %d, %v): %s", code, err, out)
	}
	// What the fixture lists a client that declares nothing.
	c := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(testkit.FixtureBin(t), "-name", "ev", "-client-requests")}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	direct, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Backends[0].Tools != len(direct.Tools) {
		t.Fatalf("check saw %d tools, want %d (none of the capability-gated ones): %s", rep.Backends[0].Tools, len(direct.Tools), out)
	}
	if testkit.UnderWine() {
		// Starting mcp-mux and the fixture there takes about as long as
		// the 2 s an agent is waited for: the time tells nothing.
		t.Logf("Wine: check took %s; not compared with the agent's wait", took)
		return
	}
	if took > 1500*time.Millisecond {
		t.Fatalf("check took %s: it waited for an agent", took)
	}
}
