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
	"testing"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }
