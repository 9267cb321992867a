package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestConfigWindowsPaths: on Windows a path in the config may use / or \,
// may be rooted without a drive (\logs: on the config file's drive), and a
// command may be written without its .exe, as exec finds it.
func TestConfigWindowsPaths(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"logs", `bin`} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{`bin\server.exe`, `bin\notes.txt`} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("MZ"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(t.TempDir())
	vol := filepath.VolumeName(dir)
	rooted := strings.TrimPrefix(dir, vol) // \Users\...\Temp\...: no drive
	path := filepath.Join(dir, "mcp-mux.toml")
	src := `[mux]
log_file = '` + rooted + `\logs\mux.log'
[[backend]]
name = "a"
command = 'bin\server'
[[backend]]
name = "b"
command = "bin/server.exe"
[[backend]]
name = "c"
command = '.\server'
cwd = 'bin'
`
	cfg, err := Parse(path, []byte(src), noEnv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if want := filepath.Join(dir, "logs", "mux.log"); cfg.Mux.LogFile != want {
		t.Errorf("log_file = %q, want %q (on the config file's drive)", cfg.Mux.LogFile, want)
	}
	for i, want := range []string{filepath.Join(dir, "bin", "server"), filepath.Join(dir, "bin", "server.exe"), filepath.Join(dir, "bin", "server")} {
		if got := cfg.Backends[i].Command; got != want {
			t.Errorf("backend %s: command %q, want %q", cfg.Backends[i].Name, got, want)
		}
	}

	// Not a program Windows runs; /dev/stdout is no device but a path on
	// the config file's drive.
	_, err = Parse(path, []byte("[mux]\nlog_file = \"/dev/stdout\"\n[[backend]]\nname = \"a\"\ncommand = 'bin\\notes.txt'\n"), noEnv)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: %v, want problems", err)
	}
	checkProblems(t, path, ce.Problems, []wantProblem{
		{2, `mux.log_file: directory "/dev" does not exist`}, // on the config file's drive
		{5, `backend #1 (a).command: command "bin\\notes.txt" is not executable`},
	})
	if strings.Contains(err.Error(), "stdout") {
		t.Errorf("/dev/stdout is no name of stdout on Windows: %v", err)
	}
}

// TestConfigWindowsVariablesAndNpxArgs: %NAME% expands as ${NAME} does
// (when set), "~\" is the home directory, and an argument npx.cmd (run
// through cmd.exe) cannot be given is a problem naming it.
func TestConfigWindowsVariablesAndNpxArgs(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{`Roaming\notes`, `home\data`, "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, `bin\npx.cmd`), []byte("@echo off\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Join(dir, "bin")+";"+os.Getenv("PATH"))
	env := envOf(map[string]string{"APPDATA": filepath.Join(dir, "Roaming"), "USERPROFILE": filepath.Join(dir, "home")})
	path := filepath.Join(dir, "mcp-mux.toml")
	src := `[[backend]]
name = "notes"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", '%APPDATA%\notes', '~\data', "%NOT_SET%", "100%"]
cwd = '%APPDATA%\notes'
`
	cfg, err := Parse(path, []byte(src), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	b := cfg.Backends[0]
	want := []string{"-y", "@modelcontextprotocol/server-filesystem", filepath.Join(dir, `Roaming\notes`), filepath.Join(dir, `home\data`), "%NOT_SET%", "100%"}
	if !slices.Equal(b.Args, want) {
		t.Errorf("args %q, want %q", b.Args, want)
	}
	if b.Cwd != filepath.Join(dir, `Roaming\notes`) {
		t.Errorf("cwd %q", b.Cwd)
	}

	_, err = Parse(path, []byte("[[backend]]\nname = \"notes\"\ncommand = \"npx\"\nargs = [\"-y\", \"pkg\", \"two\\nlines\"]\n"), env)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: %v, want problems", err)
	}
	checkProblems(t, path, ce.Problems, []wantProblem{
		{4, `backend #1 (notes).args #3: args #3 ("two\nlines") cannot be passed to npx.cmd, which Windows runs through cmd.exe`},
	})
}
