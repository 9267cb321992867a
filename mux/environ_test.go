package mux

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/catalogmem"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A mux made WithEnviron serves a session that is not mcp-mux's own
// process: its backends get the session's environment and start in its
// directory, and a reload reads the file for that environment again.
func TestMuxWithEnvironStartsBackendsInTheSessionsEnvironment(t *testing.T) {
	t.Setenv("MUX_TEST_SESSION_VAR", "the process's")
	t.Setenv("MUX_TEST_INHERITED", "the process's")
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MUX_TEST_") {
			environ = append(environ, kv)
		}
	}
	environ = append(environ, "MUX_TEST_SESSION_VAR=the session's", "MUX_TEST_INHERITED=the session's")
	sessionDir := t.TempDir()
	entry := func(seen string) string {
		return fmt.Sprintf("[[backend]]\nname = \"fx\"\ncommand = %q\nargs = [\"-name\", \"fx\", \"-env-tool\", \"-cwd-tool\"]\n"+
			"inherit_env = [\"MUX_TEST_INHERITED\"]\nenv = { SEEN = %q }\n", testkit.FixtureBin(t), seen)
	}
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	writeFile(t, path, entry("${MUX_TEST_SESSION_VAR}"))
	cfg, err := config.LoadForServingIn(path, environ)
	if err != nil {
		t.Fatal(err)
	}
	m := New(cfg, testLogger(t), "test", WithEnviron(environ, sessionDir))
	m.catalogs = catalogmem.Open(filepath.Join(t.TempDir(), "catalogs"))
	m.backoffBase = 10 * time.Millisecond
	m.Start()
	t.Cleanup(m.Close)
	cs := connect(t, m, nil)

	env := func() (map[string]string, error) {
		res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__env"})
		if err != nil {
			return nil, err
		}
		var kvs []string
		if err := json.Unmarshal([]byte(text(t, res.Content)), &kvs); err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, kv := range kvs {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = v
		}
		return out, nil
	}
	got, err := env()
	if err != nil {
		t.Fatal(err)
	}
	if got["SEEN"] != "the session's" || got["MUX_TEST_INHERITED"] != "the session's" {
		t.Errorf("backend got SEEN=%q MUX_TEST_INHERITED=%q, want the session's values", got["SEEN"], got["MUX_TEST_INHERITED"])
	}
	if wd := callText(t, cs, "fx__cwd", nil); !sameDir(wd, sessionDir) {
		t.Errorf("backend runs in %q, want the session's directory %q", wd, sessionDir)
	}

	writeFile(t, path, entry("${MUX_TEST_SESSION_VAR}, read again"))
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	// The backend restarts with its env changed: SEEN is read again, as
	// the session's environment or mcp-mux's would make it.
	testkit.Eventually(t, 10*time.Second, "the backend restarted with the file read again", func() bool {
		got, err = env()
		return err == nil && strings.HasSuffix(got["SEEN"], "read again")
	})
	if got["SEEN"] != "the session's, read again" {
		t.Errorf("after a reload, SEEN=%q: want it expanded from the session's environment", got["SEEN"])
	}
}

// sameDir reports whether a and b are one directory (a temporary
// directory may be reached through a symlink, as on macOS).
func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}
