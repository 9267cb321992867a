package config

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A session's config is read in the session's environment: ${VAR} is its
// value there, and a bare command is what its PATH names, not mcp-mux's.
func TestLoadForServingInExpandsAndLooksUpInTheGivenEnviron(t *testing.T) {
	t.Setenv("MUX_TEST_TOKEN", "the process's")
	bin := t.TempDir()
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe"
	}
	if err := os.WriteFile(filepath.Join(bin, "session-server"+exe), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	src := `
[[backend]]
name = "s"
command = "session-server"
env = { TOKEN = "${MUX_TEST_TOKEN}", ONLY = "${MUX_TEST_ONLY_IN_SESSION}" }
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	environ := []string{"PATH=" + bin, "MUX_TEST_TOKEN=the session's", "MUX_TEST_ONLY_IN_SESSION=yes"}
	cfg, err := LoadForServingIn(path, environ)
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Backends[0]
	if b.Broken != "" {
		t.Fatalf("broken in the session's environment:\n%s", b.Broken)
	}
	if b.Env["TOKEN"] != "the session's" || b.Env["ONLY"] != "yes" {
		t.Errorf("env expanded from the process's environment, not the session's (TOKEN is the session's: %v)", b.Env["TOKEN"] == "the session's")
	}

	// On mcp-mux's PATH only: not found for the session.
	t.Setenv("PATH", bin)
	cfg, err = LoadForServingIn(path, []string{"PATH=" + t.TempDir(), "MUX_TEST_TOKEN=x", "MUX_TEST_ONLY_IN_SESSION=x"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `command "session-server" not found on PATH`; !strings.Contains(cfg.Backends[0].Broken, want) {
		t.Errorf("a command only on mcp-mux's PATH: Broken = %q, want %q", cfg.Backends[0].Broken, want)
	}
}
