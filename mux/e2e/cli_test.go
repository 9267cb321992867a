package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Tests of the command line as a user types it: help, version, unknown
// commands, where --config may go, and shell completion.

// TestVersionOfACheckoutBuildNamesTheRevision builds mcp-mux from this
// checkout as `go install .` does, with the VCS stamp: `version`,
// `--version` and the serverInfo an agent sees all name the commit.
func TestVersionOfACheckoutBuildNamesTheRevision(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		t.Skipf("no git checkout: %v", err)
	}
	short := strings.TrimSpace(string(head))
	bin := filepath.Join(t.TempDir(), "mcp-mux")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var printed []string
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		out, errOut, code := runBin(t, bin, args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "mcp-mux ") || !strings.Contains(out, short) || strings.Contains(out, "dev\n") {
			t.Errorf("mcp-mux %v: exit %d, stdout %q, stderr %q; want \"mcp-mux …%s…\" on stdout", args, code, out, errOut, short)
		}
		printed = append(printed, out)
	}
	if printed[0] != printed[1] || printed[0] != printed[2] {
		t.Errorf("version and --version differ: %q", printed)
	}

	w := startWireCmd(t, bin, "--config", testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"}))
	w.send(initLine)
	m := w.response(1)
	var res struct {
		ServerInfo struct{ Version string } `json:"serverInfo"`
	}
	json.Unmarshal(m.Result, &res)
	if want := strings.TrimSpace(strings.TrimPrefix(printed[0], "mcp-mux ")); res.ServerInfo.Version != want {
		t.Errorf("serverInfo.version %q, want %q", res.ServerInfo.Version, want)
	}
}

// runBin runs a binary with args (stdin empty) and returns stdout, stderr
// and the exit code.
func runBin(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func TestUnknownCommandSuggestsTheNearest(t *testing.T) {
	for _, c := range []struct{ typed, want string }{{"chek", "check"}, {"serv", "serve"}, {"verison", "version"}, {"completoin", "completion"}} {
		out, errOut, code := runBin(t, testkit.MuxBin(t), c.typed)
		if code == 0 || out != "" || !strings.Contains(errOut, `unknown command "`+c.typed+`"`) || !strings.Contains(errOut, `Did you mean "`+c.want+`"?`) {
			t.Errorf("mcp-mux %s: exit %d, stdout %q, stderr %q; want a non-zero exit and `Did you mean %q?` on stderr", c.typed, code, out, errOut, c.want)
		}
	}
	// The same after a global flag.
	out, errOut, code := runBin(t, testkit.MuxBin(t), "-c", "x.toml", "chek")
	if code == 0 || out != "" || !strings.Contains(errOut, `Did you mean "check"?`) {
		t.Errorf("mcp-mux -c x.toml chek: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestHelpGoesToStdout: help is what was asked for, so it goes to stdout
// (to page or grep it); a usage mistake goes to stderr, and so nothing of
// the CLI's own ever reaches the stdout of a serving mcp-mux.
func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "check"}, {"check", "--help"}, {"check", "-h"}, {"serve", "--help"}, {"completion", "--help"}} {
		out, errOut, code := runBin(t, testkit.MuxBin(t), args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "USAGE:") {
			t.Errorf("mcp-mux %v: exit %d, stderr %q, stdout %q; want the help on stdout", args, code, errOut, out)
		}
	}
	for _, args := range [][]string{{"--bogus"}, {"serve", "--bogus"}, {"check", "--conect"}} {
		out, errOut, code := runBin(t, testkit.MuxBin(t), args...)
		if code == 0 || out != "" || !strings.Contains(errOut, "flag provided but not defined") {
			t.Errorf("mcp-mux %v: exit %d, stdout %q, stderr %q; want the mistake on stderr only", args, code, out, errOut)
		}
	}
	if _, errOut, _ := runBin(t, testkit.MuxBin(t), "check", "--conect"); !strings.Contains(errOut, `Did you mean "--connect"?`) {
		t.Errorf("check --conect: no suggestion in %q", errOut)
	}
}

// TestConfigMayComeBeforeOrAfterTheCommand: -c/--config is accepted before
// the command or after it, and check takes the file as its argument.
func TestConfigMayComeBeforeOrAfterTheCommand(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"})
	for _, args := range [][]string{
		{"check", "--config", cfg}, {"check", "-c", cfg}, {"--config", cfg, "check"}, {"-c", cfg, "check"},
		{"check", cfg}, {"check", cfg, "--config", cfg}, {"-c", cfg, "check", cfg},
	} {
		out, errOut, code := runBin(t, testkit.MuxBin(t), args...)
		if code != 0 || !strings.Contains(out, cfg+": OK (1 backend)") {
			t.Errorf("mcp-mux %v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	// Flags after the file apply too.
	out, errOut, code := runBin(t, testkit.MuxBin(t), "check", cfg, "--connect", "--list")
	if code != 0 || !strings.Contains(out, "notes__echo") {
		t.Errorf("check FILE --connect --list: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	other := testkit.WriteConfig(t, "", []string{"other", "-name", "other"})
	out, errOut, code = runBin(t, testkit.MuxBin(t), "check", cfg, "--config", other)
	if code == 0 || !strings.Contains(errOut, "two config files") {
		t.Errorf("check FILE --config OTHER: exit %d, stdout %q, stderr %q; want an error", code, out, errOut)
	}
	_, errOut, code = runBin(t, testkit.MuxBin(t), "check", cfg, other)
	if code == 0 || !strings.Contains(errOut, "one config file") {
		t.Errorf("check FILE OTHER: exit %d, stderr %q; want an error", code, errOut)
	}

	for _, args := range [][]string{{"serve", "--config", cfg}, {"serve", "-c", cfg}, {"--config", cfg, "serve"}, {"-c", cfg, "serve"}, {"-c", cfg}} {
		w := startWireCmd(t, testkit.MuxBin(t), args...)
		w.initialize()
		res := w.rawResult(2, "tools/list", "{}")
		if tools := byName(t, res["tools"], "name", "notes__"); tools["echo"] == nil {
			t.Errorf("mcp-mux %v: tools/list %v\nstderr:\n%s", args, res, w.stderr)
		}
		w.stdin.Close()
		<-w.exited
		if !strings.Contains(w.stderr.String(), "path="+cfg) {
			t.Errorf("mcp-mux %v: did not load %s:\n%s", args, cfg, w.stderr)
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, c := range []struct{ shell, want string }{
		{"bash", "complete -o bashdefault -o default -o nospace -F _mcp_mux_bash_autocomplete mcp-mux"},
		{"zsh", "#compdef mcp-mux"},
		{"fish", "complete -r -c mcp-mux -n '__fish_mcp-mux_no_subcommand' -a 'check'"},
	} {
		out, errOut, code := runBin(t, testkit.MuxBin(t), "completion", c.shell)
		if code != 0 || errOut != "" || !strings.Contains(out, c.want) || strings.Contains(out, "$PROG") {
			t.Errorf("completion %s: exit %d, stderr %q, want %q in\n%s", c.shell, code, errOut, c.want, out)
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}} {
		out, errOut, code := runBin(t, testkit.MuxBin(t), args...)
		if code == 0 || out != "" || !strings.Contains(errOut, "bash, zsh or fish") {
			t.Errorf("mcp-mux %v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}

	// What the scripts ask the binary for.
	out, _, _ := runBin(t, testkit.MuxBin(t), "--generate-bash-completion")
	for _, cmd := range []string{"serve", "check", "version", "completion"} {
		if !regexp.MustCompile(`(?m)^` + cmd + `(:|$)`).MatchString(out) {
			t.Errorf("command %s not offered for completion:\n%s", cmd, out)
		}
	}
	out, _, _ = runBin(t, testkit.MuxBin(t), "check", "--c", "--generate-bash-completion")
	if !strings.Contains(out, "--connect") || !strings.Contains(out, "--config") {
		t.Errorf("check's flags not offered for completion:\n%s", out)
	}
}

// TestBashCompletionCompletesACommand runs the bash script as bash does
// on TAB, with a stand-in for bash-completion's _get_comp_words_by_ref.
func TestBashCompletionCompletesACommand(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, _, _ := runBin(t, testkit.MuxBin(t), "completion", "bash")
	src := script + `
_get_comp_words_by_ref() { cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
COMP_WORDS=(mcp-mux ch); COMP_CWORD=1; _mcp_mux_bash_autocomplete; echo "1:${COMPREPLY[*]}"
COMP_WORDS=(mcp-mux check --conn); COMP_CWORD=2; _mcp_mux_bash_autocomplete; echo "2:${COMPREPLY[*]}"
COMP_WORDS=(mcp-mux completion ""); COMP_CWORD=2; _mcp_mux_bash_autocomplete; echo "3:${COMPREPLY[*]}"
`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", src)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(testkit.MuxBin(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	for _, want := range []string{"1:check\n", "2:--connect\n", "3:bash zsh fish\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
}

// findFish is fish's path, or why the fish completion test cannot run here.
func findFish() (path, why string) {
	p, err := exec.LookPath("fish")
	if err != nil {
		return "", "fish is not on PATH (Debian: apt-get install fish)"
	}
	return p, ""
}

// TestFishCompletionCompletesACommand asks fish itself, where it is
// installed, what the script completes; and has zsh parse its script.
func TestFishCompletionCompletesACommand(t *testing.T) {
	path := filepath.Dir(testkit.MuxBin(t)) + string(os.PathListSeparator) + os.Getenv("PATH")
	if zsh, err := exec.LookPath("zsh"); err == nil {
		script := filepath.Join(t.TempDir(), "_mcp-mux")
		out, _, _ := runBin(t, testkit.MuxBin(t), "completion", "zsh")
		os.WriteFile(script, []byte(out), 0o644)
		if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
			t.Errorf("zsh -n: %v\n%s", err, out)
		}
	}
	fish, why := findFish()
	if why != "" {
		t.Skip("fish completion test skipped: " + why)
	}
	script := filepath.Join(t.TempDir(), "mcp-mux.fish")
	out, _, _ := runBin(t, testkit.MuxBin(t), "completion", "fish")
	os.WriteFile(script, []byte(out), 0o644)
	cmd := exec.Command(fish, "--no-config", "-c", `source $argv[1]; complete -C "mcp-mux ch"; echo ---; complete -C "mcp-mux check --conn"`, script)
	cmd.Env = append(os.Environ(), "PATH="+path)
	cmd.Dir = t.TempDir() // fish offers the files here too
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fish: %v\n%s", err, got)
	}
	if !regexp.MustCompile(`(?s)^check\t[^\n]*\n---\n--connect\t`).Match(got) {
		t.Errorf("fish completes: %q", got)
	}
}
