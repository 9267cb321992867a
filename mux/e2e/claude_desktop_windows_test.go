package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// TestWindowsClaudeDesktopConfigWithNpxIsImportedCheckedAndServed: a
// claude_desktop_config.json as Windows users have it (npx, C:\\ paths,
// a program under a directory with a space, %APPDATA%) is imported,
// passes check --connect, and is served: npx, found as npx.cmd through
// PATHEXT and run through cmd.exe, gives the program behind it every
// argument as it was written. npx.cmd here is a stand-in for npm's shim
// that runs the fixture with its arguments (%*), as npm's runs node.
func TestWindowsClaudeDesktopConfigWithNpxIsImportedCheckedAndServed(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "nodejs")
	tasks := filepath.Join(dir, "Tasks App", "tasks-mcp.exe")
	for _, d := range []string{bin, filepath.Dir(tasks), filepath.Join(dir, "Roaming")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shim := "@ECHO off\r\nSETLOCAL\r\n\"" + testkit.FixtureBin(t) + "\" -name filesystem -args-tool -- %*\r\n"
	if err := os.WriteFile(filepath.Join(bin, "npx.cmd"), []byte(shim), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(testkit.FixtureBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tasks, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("APPDATA", filepath.Join(dir, "Roaming"))

	data, err := os.ReadFile("../../testdata/import/windows/claude_desktop_config.json")
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(dir)
	data = bytes.ReplaceAll(data, []byte("@DIR@"), quoted[1:len(quoted)-1])
	src := filepath.Join(dir, "Claude", "claude_desktop_config.json")
	os.MkdirAll(filepath.Dir(src), 0o755)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "mcp-mux", "config.toml")
	stdout, stderr, code := runEnv(t, dir, nil, "import", src, "--output", out)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "check: OK") {
		t.Fatalf("import: exit %d, stdout %q, want check: OK\n%s", code, stdout, stderr)
	}
	text, _ := os.ReadFile(out)
	if chk, code := runCheck(t, "--connect", "--config", out); code != 0 || !strings.Contains(chk, "filesystem") || !strings.Contains(chk, "tasks") {
		t.Fatalf("check --connect: exit %d\n%s\nconfig:\n%s", code, chk, text)
	}

	c := mcp.NewClient(&mcp.Implementation{Name: "claude-desktop", Version: "1"}, nil)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: exec.Command(testkit.MuxBin(t), "--config", out)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for tool, want := range map[string][]string{
		"filesystem__args": {"-name", "filesystem", "-args-tool", "--", "-y", "@modelcontextprotocol/server-filesystem", `C:\Users\me\Desktop`, filepath.Join(dir, "My Documents")},
		"tasks__args":      {"-name", "tasks", "-args-tool", "--", "--db", filepath.Join(dir, `Roaming\Tasks\tasks.db`)},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool})
		if err != nil {
			t.Fatalf("%s: %v\nconfig:\n%s", tool, err, text)
		}
		var got []string
		if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &got); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: the backend got %q (%v), want %q\nconfig:\n%s", tool, got, err, want, text)
		}
	}
}
