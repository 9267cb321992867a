package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// `mcp-mux import --apply` and `--undo` with the real Claude Code
// (testdata/agents, installed by npm ci there), in a home of the test's
// own. Claude Code rewrites ~/.claude.json on every start, between
// --apply and --undo as in real use; --undo must still give it back its
// servers.

// claudeCode runs the Claude Code CLI in a scratch home.
type claudeCode struct {
	bin, home, dir string
	env            []string
}

// claudeCodeMissing is Claude Code's path, or says why the Claude Code
// test cannot run here: it needs the CLI pinned in testdata/agents, and
// script(1), which gives its interactive start a terminal, as Linux has it.
func claudeCodeMissing() (bin, why string) {
	if runtime.GOOS != "linux" {
		return "", "it starts Claude Code in a terminal through Linux's script(1)"
	}
	bin, err := filepath.Abs(filepath.Join("..", "..", "testdata", "agents", "node_modules", ".bin", "claude"))
	if err != nil {
		return "", err.Error()
	}
	if _, err := os.Stat(bin); err != nil {
		return "", "testdata/agents/node_modules/.bin/claude does not exist (run: cd testdata/agents && npm ci)"
	}
	if _, err := exec.LookPath("script"); err != nil {
		return "", "script(1) is not on PATH (util-linux)"
	}
	return bin, ""
}

// newClaudeCode finds Claude Code, or skips the test saying how to get
// it; under CI, which must run it on Linux, it fails instead.
func newClaudeCode(t *testing.T) *claudeCode {
	t.Helper()
	bin, why := claudeCodeMissing()
	if why != "" {
		if os.Getenv("CI") != "" && runtime.GOOS == "linux" {
			t.Fatal(why + "; CI must run this test (.ci/run installs it)")
		}
		t.Skip("Claude Code test skipped: " + why)
	}
	c := &claudeCode{bin: bin, home: t.TempDir(), dir: t.TempDir()}
	tmp := t.TempDir() // not the one mcp-mux's binary is in: see TestImportApplyRefusesATemporaryBuild
	// Nothing of the user's: no API key, no update, no telemetry.
	c.env = []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp, "TERM=xterm-256color", "SHELL=/bin/sh",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	// As on a machine where Claude Code is set up: onboarded, the project
	// trusted, so that it starts without asking anything.
	seed, _ := json.Marshal(map[string]any{"hasCompletedOnboarding": true, "projects": map[string]any{c.dir: map[string]any{"hasTrustDialogAccepted": true}}})
	if err := os.WriteFile(filepath.Join(c.home, ".claude.json"), seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs `claude args...` in the project and returns its stdout.
func (c *claudeCode) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitOrKill(cmd, 30*time.Second); err != nil {
		t.Fatalf("claude %v: %v\n%s%s", args, err, out.String(), errb.String())
	}
	return out.String()
}

// waitOrKill waits for cmd to end, killing it after d.
func waitOrKill(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill() // script: its child ends with the terminal it gave it
		<-done
		return io.ErrNoProgress
	}
}

// servers is what `claude mcp list` says of each server: its command line
// and whether Claude Code connected to it.
func (c *claudeCode) servers(t *testing.T) map[string]string {
	t.Helper()
	out := c.run(t, "mcp", "list")
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(line, ": ")
		if ok && (strings.Contains(rest, " - ✔ ") || strings.Contains(rest, " - ✘ ")) {
			got[name] = rest
		}
	}
	if len(got) == 0 {
		t.Fatalf("claude mcp list lists no server:\n%s", out)
	}
	return got
}

// startupCount is ~/.claude.json's numStartups, which Claude Code counts
// up on each interactive start.
func (c *claudeCode) startupCount(t *testing.T) (int, bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.home, ".claude.json"))
	var v struct{ NumStartups int }
	if err != nil || json.Unmarshal(data, &v) != nil {
		return 0, false // not there, or being written
	}
	return v.NumStartups, true
}

// start starts Claude Code as a user does, in a terminal, which rewrites
// ~/.claude.json (its counters, the project's state, and on exit the
// session's), and ends it with Ctrl-D twice once it has.
func (c *claudeCode) start(t *testing.T) {
	t.Helper()
	before, _ := c.startupCount(t)
	cmd := exec.Command("script", "-qfec", "'"+strings.ReplaceAll(c.bin, "'", `'\''`)+"'", "/dev/null")
	cmd.Dir, cmd.Env = c.dir, c.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := testkit.Poll(20*time.Second, func() bool {
		n, ok := c.startupCount(t)
		return ok && n > before
	})
	// Ctrl-D twice ends it, once it reads its terminal: until then, the
	// keys are lost, so they go again until it has ended.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var exit error
	ended := testkit.Poll(15*time.Second, func() bool {
		stdin.Write([]byte{4, 4})
		select {
		case exit = <-done:
			return true
		case <-time.After(300 * time.Millisecond):
			return false
		}
	})
	if !ended {
		cmd.Process.Kill()
		exit = <-done
	}
	stdin.Close()
	if !started {
		t.Fatalf("Claude Code did not count its start in ~/.claude.json (exit: %v):\n%q", exit, out.String())
	}
	if !ended || exit != nil {
		t.Fatalf("Claude Code did not end on Ctrl-D (ended %v, exit %v):\n%q", ended, exit, out.String())
	}
}

// TestImportApplyAndUndoWithClaudeCode: servers registered with `claude
// mcp add` (two of the user's, one with env; one of the project's) move to
// mcp-mux with --apply, and Claude Code connects to it; Claude Code starts
// (rewriting ~/.claude.json) before and after; --undo gives Claude Code
// back the very servers `claude mcp list` showed before.
func TestImportApplyAndUndoWithClaudeCode(t *testing.T) {
	c := newClaudeCode(t)
	began := time.Now()
	fixture := testkit.FixtureBin(t)
	c.run(t, "mcp", "add", "--scope", "user", "notes", "--", fixture, "-name", "notes")
	c.run(t, "mcp", "add", "--scope", "user", "tasks", "-e", "TASKS_MODE=fast", "--", fixture, "-name", "tasks")
	c.run(t, "mcp", "add", "--scope", "local", "db", "--", fixture, "-name", "db")
	before := c.servers(t)
	if got := slices.Sorted(maps.Keys(before)); !slices.Equal(got, []string{"db", "notes", "tasks"}) {
		t.Fatalf("before --apply, claude mcp list shows %q", before)
	}
	for name, s := range before {
		if !strings.Contains(s, "✔ Connected") {
			t.Fatalf("before --apply, %s: %s", name, s)
		}
	}
	c.start(t)
	rewritten, _ := os.ReadFile(filepath.Join(c.home, ".claude.json"))

	mux := testkit.MuxBin(t)
	_, stderr, code := runBinEnv(t, mux, c.dir, c.env, "import", "--apply")
	if code != 0 {
		t.Fatalf("--apply: exit %d\n%s", code, stderr)
	}
	after := c.servers(t)
	local := "mcp-mux-" + filepath.Base(c.dir)
	if got := slices.Sorted(maps.Keys(after)); !slices.Equal(got, []string{"mcp-mux", local}) {
		t.Errorf("after --apply, claude mcp list shows %q\n%s", after, stderr)
	}
	for name, s := range after {
		if !strings.Contains(s, "✔ Connected") || !strings.HasPrefix(s, mux+" -c ") {
			t.Errorf("after --apply, %s: %s", name, s)
		}
	}
	c.start(t)
	if now, _ := os.ReadFile(filepath.Join(c.home, ".claude.json")); bytes.Equal(now, rewritten) {
		t.Fatal("Claude Code did not rewrite ~/.claude.json after --apply")
	}

	_, stderr, code = runBinEnv(t, mux, c.dir, c.env, "import", "--undo")
	if code != 0 {
		t.Fatalf("--undo: exit %d\n%s", code, stderr)
	}
	if got := c.servers(t); !maps.Equal(got, before) {
		t.Errorf("after --undo, claude mcp list shows\n%q\nwant, as before --apply,\n%q\n%s", got, before, stderr)
	}
	if n, _ := c.startupCount(t); n != 2 {
		t.Errorf("--undo lost what Claude Code wrote since --apply: numStartups %d, want 2", n)
	}
	t.Logf("took %v", time.Since(began).Round(100*time.Millisecond))
}
