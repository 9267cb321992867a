package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// End-to-end tests of the mcp-mux that `import` writes into the clients:
// the one the user runs, never a build that goes away.

// copyBin copies the mcp-mux binary of h to path.
func (h *applyHome) copyBin(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(h.bin)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// envWith is env with name set to value (in place of any it had).
func envWith(env []string, name, value string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	return append(out, name+"="+value)
}

// TestImportApplyRefusesATemporaryBuild: an mcp-mux that `go run` built,
// in the Go build cache or the temporary directory, is not written into
// any client (it goes at the next cache trim): --apply refuses and says
// to install it, changing nothing; import and init print their blocks
// with a warning.
func TestImportApplyRefusesATemporaryBuild(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the build cache and temporary directory are found otherwise on Windows; the check is the same")
	}
	h := newApplyHome(t)
	tmp := t.TempDir()
	cache := filepath.Join(t.TempDir(), "gocache")
	defaultCache := filepath.Join(h.home, ".cache") // os.UserCacheDir with HOME alone
	if runtime.GOOS == "darwin" {
		defaultCache = filepath.Join(h.home, "Library", "Caches")
	}
	cases := []struct {
		name, bin string
		env       []string
	}{
		{"GOCACHE", filepath.Join(cache, "3f", "3f0a9c-d", "mcp-mux"), envWith(h.env, "GOCACHE", cache)},
		{"the default build cache", filepath.Join(defaultCache, "go-build", "3f", "3f0a9c-d", "mcp-mux"), h.env},
		{"the temporary directory", filepath.Join(tmp, "go-build2781", "b001", "exe", "mcp-mux"), envWith(h.env, "TMPDIR", tmp)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.copyBin(t, c.bin)
			snap := h.snapshot(t)
			stdout, stderr, code := runBinEnv(t, c.bin, h.project, c.env, "import", "--apply")
			if code != 1 || !strings.Contains(stderr, "go install") || !strings.Contains(stderr, c.bin) {
				t.Errorf("--apply: exit %d\n%s%s", code, stdout, stderr)
			}
			for what, v := range h.snapshot(t) {
				if v != snap[what] {
					t.Errorf("--apply changed %s", what)
				}
			}
			_, stderr, code = runBinEnv(t, c.bin, h.project, c.env, "import", "-o", filepath.Join(t.TempDir(), "c.toml"))
			if code != 0 || !strings.Contains(stderr, "go install") {
				t.Errorf("import: exit %d\n%s", code, stderr)
			}
			_, stderr, code = runBinEnv(t, c.bin, h.project, c.env, "init", "-o", filepath.Join(t.TempDir(), "c.toml"))
			if code != 0 || !strings.Contains(stderr, "go install") {
				t.Errorf("init: exit %d\n%s", code, stderr)
			}
		})
	}
}

// TestImportApplyWritesTheLinkThatWasRun: an mcp-mux installed as a link
// to a versioned directory (as Homebrew installs it) is written into the
// clients as the link, run by its path or found on PATH, so that an
// upgrade, which replaces the directory, leaves the clients working.
func TestImportApplyWritesTheLinkThatWasRun(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no symbolic links without privileges on Windows")
	}
	h := newApplyHome(t)
	root := t.TempDir()
	h.copyBin(t, filepath.Join(root, "Cellar", "mcp-mux", "0.9.0", "bin", "mcp-mux"))
	link := filepath.Join(root, "bin", "mcp-mux")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink("../Cellar/mcp-mux/0.9.0/bin/mcp-mux", link); err != nil {
		t.Fatal(err)
	}
	byPath := exec.Command(link, "import", "--apply")
	byName := &exec.Cmd{Path: link, Args: []string{"mcp-mux", "import", "--apply"}}
	for name, cmd := range map[string]*exec.Cmd{"by its path": byPath, "found on PATH": byName} {
		t.Run(name, func(t *testing.T) {
			cmd.Dir, cmd.Env = h.project, envWith(h.env, "PATH", filepath.Dir(link)+string(os.PathListSeparator)+os.Getenv("PATH"))
			stdout, stderr, code := runCmd(t, cmd)
			if code != 0 {
				t.Fatalf("--apply: exit %d\n%s%s", code, stdout, stderr)
			}
			for _, what := range []string{"cursor", "desktop", "vscode", "claude"} {
				data, _ := os.ReadFile(h.files[what])
				if e := muxEntry(t, h.files[what], data); e.Command != link {
					t.Errorf("%s's entry runs %s, want %s", what, e.Command, link)
				}
			}
			if out, code := h.run(t, "import", "--undo"); code != 0 {
				t.Fatalf("--undo: exit %d\n%s", code, out)
			}
		})
	}
}
