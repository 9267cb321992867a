package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// Mistakes the config file forgives, or explains: a shell command line in
// command, ~ and ${VAR} in paths and arguments, a bare $NAME, a relative
// command.

func TestConfigCommandWithSpacesSaysNoShellIsUsed(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix paths")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "my tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	spaced := filepath.Join(dir, "my tools", "server")
	if err := os.WriteFile(spaced, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := func(rest string) string { return "[[backend]]\nname = \"a\"\n" + rest }
	tests := []struct {
		name string
		src  string
		want []wantProblem
	}{
		{"npx line", b("command = \"npx -y @scope/pkg\"\n"), []wantProblem{
			{3, `backend #1 (a).command: command "npx -y @scope/pkg" contains spaces, but no shell is used: write command = "npx", args = ["-y", "@scope/pkg"]`},
		}},
		{"args given too: they follow", b("command = \"uvx mcp-server-git\"\nargs = [\"--repository\", \"/r\"]\n"), []wantProblem{
			{3, `no shell is used: write command = "uvx", args = ["mcp-server-git", "--repository", "/r"]`},
		}},
		{"shell quotes are taken apart", b(`command = "python3 -c 'print(\"hi\")' \"a b\""` + "\n"), []wantProblem{
			{3, `no shell is used: write command = "python3", args = ["-c", "print(\"hi\")", "a b"]`},
		}},
		{"tabs and a path", b("command = \"/usr/bin/env\\tnode  server.js\"\n"), []wantProblem{
			{3, `no shell is used: write command = "/usr/bin/env", args = ["node", "server.js"]`},
		}},
		{"a path that does not exist", b("command = \"/opt/My App/server\"\n"), []wantProblem{
			{3, `no shell is used: write command = "/opt/My", args = ["App/server"] (or, if it is one path with spaces in it: "/opt/My App/server" does not exist)`},
		}},
		{"an existing path with spaces is fine", b("command = \"" + spaced + "\"\n"), nil},
		{"relative path with spaces is fine", b("command = \"my tools/server\"\ncwd = \"" + dir + "\"\n"), nil},
		{"disabled backends are not checked", b("command = \"npx -y x\"\ndisabled = true\n[[backend]]\nname = \"b\"\ncommand = \"go\"\n"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseString(t, tt.src, noEnv)
			checkProblems(t, "test.toml", ps, tt.want)
		})
	}
}

func TestConfigTildeIsTheHomeDirectory(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix paths")
	}
	home := t.TempDir()
	for _, d := range []string{"bin", "work", "logs"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "bin", "server"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"HOME": home})
	cfg, ps := parseString(t, `[mux]
log_file = "~/logs/mux.log"
[[backend]]
name = "a"
command = "~/bin/server"
args = ["~", "~/data", "a~/b", "~user/x", "--dir=~/x", "~${HOME}"]
cwd = "~/work"
env = { DIR = "~/x" }
[[backend]]
name = "b"
command = "go"
cwd = "~"
`, env)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	a, b := cfg.Backends[0], cfg.Backends[1]
	if want := filepath.Join(home, "logs/mux.log"); cfg.Mux.LogFile != want {
		t.Errorf("log_file = %q, want %q", cfg.Mux.LogFile, want)
	}
	if want := filepath.Join(home, "bin/server"); a.Command != want {
		t.Errorf("command = %q, want %q", a.Command, want)
	}
	if want := []string{home, home + "/data", "a~/b", "~user/x", "--dir=~/x", "~" + home}; !reflect.DeepEqual(a.Args, want) {
		t.Errorf("args = %q, want %q", a.Args, want)
	}
	if want := filepath.Join(home, "work"); a.Cwd != want {
		t.Errorf("cwd = %q, want %q", a.Cwd, want)
	}
	if a.Env["DIR"] != "~/x" {
		t.Errorf("env DIR = %q: env values are not paths and keep their ~", a.Env["DIR"])
	}
	if b.Cwd != home {
		t.Errorf("cwd ~ = %q, want %q", b.Cwd, home)
	}

	// No HOME: a ~ cannot be expanded, and the message says why.
	_, ps = parseString(t, "[mux]\nlog_file = \"~/mux.log\"\n[[backend]]\nname = \"a\"\ncommand = \"go\"\nargs = [\"~/x\"]\n", noEnv)
	checkProblems(t, "test.toml", ps, []wantProblem{
		{2, "mux.log_file: cannot expand \"~\": HOME is not set"},
		{6, "backend #1 (a).args #1: cannot expand \"~\": HOME is not set"},
	})
}

func TestConfigVariablesExpandInCommandArgsAndCwd(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix paths")
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proj", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proj", "bin", "srv"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"ROOT": root, "EMPTY": "", "Mixed_Case9": "m"})
	cfg, ps := parseString(t, `[[backend]]
name = "a"
command = "${ROOT}/proj/bin/srv"
args = ["--root=${ROOT}", "${EMPTY:-fallback}", "${NOPE:-d}", "$$5", "${Mixed_Case9}"]
cwd = "${ROOT}/proj"
`, env)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	a := cfg.Backends[0]
	if want := filepath.Join(root, "proj/bin/srv"); a.Command != want {
		t.Errorf("command = %q, want %q", a.Command, want)
	}
	if want := []string{"--root=" + root, "fallback", "d", "$5", "m"}; !reflect.DeepEqual(a.Args, want) {
		t.Errorf("args = %q, want %q", a.Args, want)
	}
	if want := filepath.Join(root, "proj"); a.Cwd != want {
		t.Errorf("cwd = %q, want %q", a.Cwd, want)
	}

	// Unset and malformed: errors; these values are no secrets, so even a
	// name that looks like a token is shown.
	_, ps = parseString(t, `[[backend]]
name = "a"
command = "${TOOLS_DIR}/srv"
args = ["ok", "${Ab12Cd34Ef56}", "${oops"]
cwd = "${}"
[[backend]]
name = "off"
command = "${UNSET_TOO}"
args = ["${UNSET_TOO}"]
disabled = true
[[backend]]
name = "on"
command = "go"
`, env)
	checkProblems(t, "test.toml", ps, []wantProblem{
		{3, "backend #1 (a).command: ${TOOLS_DIR} is not set (use ${TOOLS_DIR:-default} for a default)"},
		{4, "backend #1 (a).args #2: ${Ab12Cd34Ef56} is not set"},
		{4, `backend #1 (a).args #3: "${" without a closing "}"`},
		{5, `backend #1 (a).cwd: empty "${}"`},
	})
}

func TestConfigBareDollarNameIsAWarning(t *testing.T) {
	// A directory really called "$PWD": the warning is about what was
	// probably meant, not about whether the value works.
	dir := filepath.Join(t.TempDir(), "$PWD")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, ps := parseString(t, `[[backend]]
name = "a"
command = "go"
args = ["$HOME/data", "$$HOME", "${HOME}", "cost: $5", "end$", "$_x and $Y"]
cwd = '`+dir+`'
env = { TOKEN = "$GITHUB_TOKEN", PASS = "pa$$word", PLAIN = "abc" }
`, envOf(map[string]string{"HOME": "/h"}))
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	got := problemStrings(cfg.Warnings)
	checkProblems(t, "test.toml", cfg.Warnings, []wantProblem{
		{4, `backend #1 (a).args #1: "$HOME" is not expanded (only "${...}" is): write ${HOME}, or $$ for a literal "$"`},
		{4, `backend #1 (a).args #6: "$_x" is not expanded`},
		{4, `backend #1 (a).args #6: "$Y" is not expanded`},
		{5, `backend #1 (a).cwd: "$PWD" is not expanded (only "${...}" is): write ${PWD}`},
		{6, `backend #1 (a).env.TOKEN: a "$" followed by a name is not expanded (only "${...}" is): write ${NAME}, or $$ for a literal "$"`},
	})
	if strings.Contains(got, "GITHUB_TOKEN") {
		t.Errorf("a warning about an env value shows part of the value:%s", got)
	}
	// Nothing to warn about: no warnings at all.
	cfg, _ = parseString(t, "[[backend]]\nname = \"a\"\ncommand = \"go\"\nargs = [\"${X:-1}\"]\n", noEnv)
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings:%s", problemStrings(cfg.Warnings))
	}
}

func TestConfigRelativeCommandNotFoundNamesTheDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp-mux.toml")
	t.Chdir(t.TempDir())
	_, err := Parse(path, []byte("[[backend]]\nname = \"a\"\ncommand = \"bin/server\"\n"), noEnv)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: %v, want problems", err)
	}
	checkProblems(t, path, ce.Problems, []wantProblem{
		{3, fmt.Sprintf(`command "bin/server" not found (looked at %q): a relative command path is relative to the config file's directory %s`, filepath.Join(dir, "bin", "server"), dir)},
	})
}

func TestConfigExampleDocumentsFiltersAndRelativePaths(t *testing.T) {
	data, err := os.ReadFile("../../mcp-mux.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"# tools = [", "# exclude_tools = [", "# prompts = [", "# exclude_prompts = [", "unknown tool", "~/", "${VAR}", "no shell"} {
		if !strings.Contains(string(data), s) {
			t.Errorf("the example does not mention %q", s)
		}
	}
}

// TestConfigSwallowedBackslashSaysUseSingleQuotes: "C:\tools\bin" in a
// basic string is C:, a tab, "ools", a backspace and "in": check says so,
// with the path as it was meant in single quotes.
func TestConfigSwallowedBackslashSaysUseSingleQuotes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	src := "[mux]\nlog_file = \"C:\\new\\file.log\"\n[[backend]]\nname = \"a\"\ncommand = \"go\"\ncwd = \"C:\\tools\\bin\"\n"
	_, err := Parse(path, []byte(src), noEnv)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: %v, want problems", err)
	}
	checkProblems(t, path, ce.Problems, []wantProblem{
		{2, `mux.log_file: "C:\new\file.log" has a control character in it: in a "double-quoted" TOML string a backslash starts an escape`},
		{6, `backend #1 (a).cwd: "C:\tools\bin" has a control character in it`},
	})
	for _, want := range []string{`'C:\new\file.log'`, `'C:\tools\bin'`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %s", err, want)
		}
	}
}
