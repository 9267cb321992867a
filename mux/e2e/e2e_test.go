// Package e2e holds the end-to-end tests: mcp-mux built and run as an
// agent runs it, over real pipes and HTTP, with real fixture backends
// (testdata/fixture), the official TypeScript SDK's client and servers
// (the interop suite), and the config files users write.
//
// They were in package main, beside the CLI, though all they use of it is
// the built binary. They live here because `go test ./...` skips testdata
// (where testdata/testkit, what they share with other packages' tests, is)
// and the module's top level has no other place than main.go, mux/,
// backends/, subs/ and testdata/. The package has test files only.
//
// The tests that need package main's own code (formatVersion, the
// progress lines of check --connect, the GC's tuning) stay there.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

func TestMain(m *testing.M) {
	if why := interopMissing(); why != "" {
		// go test shows nothing of a package that passes, skips
		// included: the user is told on the terminal, if there is one.
		tellTerminal("mux/e2e: the interop suite is skipped: " + why + "; to run it: cd testdata/interop && npm ci")
	}
	if _, why := findHAProxy(); why != "" {
		tellTerminal("mux/e2e: the load balancer test is skipped: " + why)
	}
	if _, why := findFish(); why != "" {
		tellTerminal("mux/e2e: the fish completion test is skipped: " + why)
	}
	if _, why := claudeCodeMissing(); why != "" {
		tellTerminal("mux/e2e: the Claude Code test of import --apply and --undo is skipped: " + why)
	}
	testkit.Main(m)
}

// interopMissing says why the interop suite cannot run here ("" if it
// can): it needs node and the npm packages pinned in testdata/interop.
func interopMissing() string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not on PATH (install Node.js 20 or later)"
	}
	if _, err := os.Stat(filepath.Join("..", "..", "testdata", "interop", "node_modules")); err != nil {
		return "testdata/interop/node_modules does not exist"
	}
	return ""
}

// tellTerminal writes line to the terminal the tests run in, past go
// test, which keeps a passing package's output to itself. Without a
// terminal (CI) nothing is written.
func tellTerminal(line string) {
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer tty.Close()
	fmt.Fprintln(tty, line)
}
