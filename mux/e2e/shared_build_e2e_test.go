package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

func TestADifferentBuildStartsBesideTheOldOne(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	// Another build: the same program, other bytes.
	other := filepath.Join(t.TempDir(), filepath.Base(testkit.MuxBin(t)))
	data, err := os.ReadFile(testkit.MuxBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, append(data, "another build"...), 0o755); err != nil {
		t.Fatal(err)
	}
	old := startShared(t, cfg, dir, nil, nil)
	old.call(t, "fx__echo", nil)
	oldPID := onlyShared(t).PID

	cmd := exec.Command(other, "--config", cfg)
	cmd.Dir, cmd.Env = dir, os.Environ()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = &testkit.SyncBuffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "new", Version: "1"}, nil).Connect(testkit.CtxT(t), &mcp.IOTransport{Reader: stdout, Writer: nopClose{stdin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__echo"}); err != nil {
		t.Fatal(err)
	}
	docs := sharedProcs(t)
	if len(docs) != 2 {
		t.Fatalf("%d shared processes with two builds, want 2", len(docs))
	}
	// The old one ends with its last session; the new one serves on.
	old.end(t)
	testkit.Eventually(t, 10*time.Second, "the old build's process gone", func() bool { return !alive(oldPID) })
	if _, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__echo"}); err != nil {
		t.Fatalf("the new build's session after the old one ended: %v", err)
	}
}
