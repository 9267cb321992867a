package backends

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// writeShim writes npx.cmd in a new directory, a stand-in for npm's shims
// (which end with `"%_prog%" "...\npx-cli.js" %*`): it runs the fixture
// with the arguments it was given, through %*. It returns the directory.
func writeShim(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	shim := "@ECHO off\r\nSETLOCAL\r\n\"" + testkit.FixtureBin(t) + "\" %*\r\n"
	if err := os.WriteFile(filepath.Join(dir, "npx.cmd"), []byte(shim), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runShim starts "npx", found through PATHEXT as npx.cmd (writeShim),
// with args after the fixture's own, and checks that the fixture got
// every argument as it was given.
func runShim(t *testing.T, args []string) {
	t.Helper()
	dir := writeShim(t)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	args = append([]string{"-name", "shim", "-args-tool", "--"}, args...)
	b, err := Start(context.Background(), Spec{Name: "shim", Command: "npx", Args: args},
		Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })
	res, err := call(t, b, "args", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, args) {
		for i := range max(len(got), len(args)) {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(args) {
				w = args[i]
			}
			if g != w {
				t.Errorf("argument %d: got %q, want %q", i, g, w)
			}
		}
		t.Fatalf("the fixture got %q", got)
	}
}

// TestCmdShimGetsItsArgumentsUnchanged: "npx" with what users write
// after it, and with what cmd.exe would take apart, run or drop were the
// arguments quoted for CommandLineToArgvW as os/exec does, reaches the
// program behind npx.cmd as it was written.
func TestCmdShimGetsItsArgumentsUnchanged(t *testing.T) {
	runShim(t, []string{
		"-y", "@modelcontextprotocol/server-filesystem", `C:\Users\me\My Documents`, "C:/Users/me/notes",
		"--port=8080", "", "two words", "&calc", "a&b", "a|b", "<in>", ">out", "^caret", "(paren)",
		"a,b;c=d", "!bang!", `C:\dir\`, `C:\Program Files\x\`, "été", "日本語", "end",
	})
}

// TestCmdShimGetsPercentSignsUnexpanded: cmd.exe expands %NAME% even
// between quotes; %cd:~,% after each % stops it.
func TestCmdShimGetsPercentSignsUnexpanded(t *testing.T) {
	testkit.SkipUnderWine(t, "its cmd.exe expands %NAME% and %1 again in the text a batch file's %* pasted (Windows does not), and crashes on some")
	runShim(t, []string{"%PATH%", "%1", "%*", "%~dp0", "100%", "50% off", "%%", "a%b%c"})
}

// TestCmdShimRefusesALineBreakNamingTheArgument: what cmd.exe cannot
// pass is refused before anything starts, with the argument's index.
func TestCmdShimRefusesALineBreakNamingTheArgument(t *testing.T) {
	dir := writeShim(t)
	_, err := Start(context.Background(), Spec{Name: "shim", Command: filepath.Join(dir, "npx.cmd"), Args: []string{"-y", "two\nlines"}},
		Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 5 * time.Second})
	var be *BatchArgError
	if !errors.As(err, &be) || be.Index != 1 || !strings.Contains(err.Error(), "args[1]") {
		t.Fatalf("Start: %v, want args[1] refused", err)
	}
}
