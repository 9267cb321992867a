package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Codex CLI's sessions are short (codex exec: a few requests, then it
// closes mcp-mux's stdin), and it does not wait for a server that is not
// ready. One session, however short, leaves every backend remembered: the
// next one gets initialize, with every backend's instructions, and the
// whole first list from memory, no backend started.
func TestAShortSessionLeavesTheNextOneAnsweredFromMemory(t *testing.T) {
	catalogs := filepath.Join(t.TempDir(), "catalogs")
	env := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MCP_MUX_CATALOGS=") }), "MCP_MUX_CATALOGS="+catalogs)
	cfg := testkit.WriteConfig(t, "tool_list = \"all\"",
		[]string{"alpha", "-name", "alpha", "-instructions", "Alpha says hi."},
		[]string{"beta", "-name", "beta", "-tools", "shout", "-instructions", "Beta says hi."},
		[]string{"gamma", "-name", "gamma", "-tools", "sing"},
		[]string{"delta", "-name", "delta", "-tools", "dance", "-instructions", "Delta says hi."},
	)
	whole := []string{"alpha__echo", "beta__shout", "gamma__sing", "delta__dance"}
	session := func() (*mcp.ClientSession, *testkit.SyncBuffer) {
		t.Helper()
		cmd := exec.Command(testkit.MuxBin(t), "-c", cfg)
		cmd.Env = env
		stderr := &testkit.SyncBuffer{}
		cmd.Stderr = stderr
		c := mcp.NewClient(&mcp.Implementation{Name: "codex-mcp-client", Title: "Codex", Version: "0.169.0"}, nil)
		cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
		if err != nil {
			t.Fatal(err)
		}
		return cs, stderr
	}

	// Cold: the list is whole once every backend is ready; the session
	// ends at once then, as codex exec's does.
	cs, _ := session()
	testkit.Eventually(t, 20*time.Second, "the whole list, cold", func() bool {
		tools := listedTools(t, cs)
		return !slices.ContainsFunc(whole, func(n string) bool { return !slices.Contains(tools, n) })
	})
	cs.Close() // stdin closed; it waits for mcp-mux to exit

	cs, stderr := session()
	defer cs.Close()
	instr := cs.InitializeResult().Instructions
	tools := listedTools(t, cs)
	for _, want := range []string{"Alpha says hi.", "Beta says hi.", "Delta says hi."} {
		if !strings.Contains(instr, want) {
			t.Errorf("warm initialize lacks %q:\n%s", want, instr)
		}
	}
	for _, n := range whole {
		if !slices.Contains(tools, n) {
			t.Errorf("the warm first list lacks %s: %v", n, tools)
		}
	}
	for _, b := range readBackends(t, cs).Backends {
		if b.State != "remembered" || b.PID != 0 {
			t.Errorf("%s: %q pid %d, warm, before any use: want remembered, no process", b.Name, b.State, b.PID)
		}
	}
	if t.Failed() {
		t.Logf("the warm mcp-mux's log:\n%s", stderr)
	}
}

// A backend slower than an agent's whole session (codex exec's first
// list does not wait for it, and the session ends at once) is learned
// all the same: exit lets its first start finish, within a second, so
// that the next session lists it from memory. Without that, every Codex
// run started it afresh and never offered its tools.
func TestABackendSlowerThanTheSessionIsRememberedForTheNext(t *testing.T) {
	catalogs := filepath.Join(t.TempDir(), "catalogs")
	env := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MCP_MUX_CATALOGS=") }), "MCP_MUX_CATALOGS="+catalogs)
	cfg := testkit.WriteConfig(t, "tool_list = \"all\"",
		[]string{"quick", "-name", "quick"},
		[]string{"slow", "-name", "slow", "-tools", "crawl", "-start-delay", "700ms"},
	)
	session := func() *mcp.ClientSession {
		t.Helper()
		cmd := exec.Command(testkit.MuxBin(t), "-c", cfg)
		cmd.Env = env
		c := mcp.NewClient(&mcp.Implementation{Name: "codex-mcp-client", Title: "Codex", Version: "0.169.0"}, nil)
		cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	cs := session()
	if tools := listedTools(t, cs); slices.Contains(tools, "slow__crawl") {
		t.Logf("the slow backend made the cold first list: %v", tools)
	}
	cs.Close() // stdin closed at once, as codex exec ends

	cs = session()
	defer cs.Close()
	if tools := listedTools(t, cs); !slices.Contains(tools, "slow__crawl") {
		t.Errorf("the next session's first list lacks the slow backend's tool: %v", tools)
	}
}
