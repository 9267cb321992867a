package e2e

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Protocol eras with real servers from npm: what an agent of the current
// era (2026-07-28) gets through mcp-mux from servers of the handshake era.

// TestInteropCurrentEraAgentGivesItsRootsToServerFilesystem:
// server-filesystem started without directories asks for the client's
// roots as soon as it is initialized, outside any request; an agent of
// the current era gives roots only in a request's input round. Through
// mcp-mux the agent lists and reads the files under its root, and nothing
// outside it.
func TestInteropCurrentEraAgentGivesItsRootsToServerFilesystem(t *testing.T) {
	ix := interopSetup(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "project")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("hello from the root"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(outside, []byte("not yours"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := ix.muxConfig(t, ix.backendTOML(t, serverFilesystem, ""))

	c := mcp.NewClient(&mcp.Implementation{Name: "current-era-agent", Version: "1"}, nil)
	c.AddRoots(&mcp.Root{URI: (&url.URL{Scheme: "file", Path: root}).String(), Name: "project"})
	cmd := exec.Command(testkit.MuxBin(t), "--config", cfg)
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	ctx := testkit.CtxT(t)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{}) // probes: the current era
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("the agent speaks %s, want the current era", v)
	}
	call := func(tool string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__" + tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v\n%s", tool, err, stderr)
		}
		var sb strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				sb.WriteString(tc.Text)
			}
		}
		return sb.String(), res.IsError
	}
	if got, isErr := call("list_directory", map[string]any{"path": root}); isErr || !strings.Contains(got, "[FILE] notes.txt") {
		t.Errorf("list_directory of the root: %q (error %v)\n%s", got, isErr, stderr)
	}
	if got, isErr := call("read_text_file", map[string]any{"path": filepath.Join(root, "notes.txt")}); isErr || got != "hello from the root" {
		t.Errorf("read_text_file under the root: %q (error %v)", got, isErr)
	}
	if got, isErr := call("read_text_file", map[string]any{"path": outside}); !isErr || strings.Contains(got, "not yours") {
		t.Errorf("read_text_file outside the root: %q (error %v), want it refused", got, isErr)
	}
	if got, _ := call("list_allowed_directories", map[string]any{}); !strings.Contains(got, root) {
		t.Errorf("allowed directories %q, want the agent's root %s", got, root)
	}
}
