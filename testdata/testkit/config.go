package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// WriteConfig writes a config file in a temporary directory and returns
// its path: a [mux] table with shutdown_grace = "1s" and the lines of
// extra, then one [[backend]] running the fixture per element of
// backends, whose first string is the backend's name and the rest the
// fixture's arguments.
func WriteConfig(t testing.TB, extra string, backends ...[]string) string {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("[mux]\nshutdown_grace = \"1s\"\n" + extra + "\n")
	for _, args := range backends {
		q := make([]string, len(args)-1)
		for i, a := range args[1:] {
			q[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&sb, "[[backend]]\nname = %q\ncommand = %q\nargs = [%s]\n\n", args[0], FixtureBin(t), strings.Join(q, ", "))
	}
	return WriteRawConfig(t, sb.String())
}

// WriteRawConfig writes src as a config file in a temporary directory and
// returns its path.
func WriteRawConfig(t testing.TB, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
