package e2e

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// An agent that closed mcp-mux's stdout (its reading end) is gone: the
// session ends as at stdin EOF, mcp-mux exits 0 and stops its backends,
// and no request is forwarded to a backend for an agent that cannot see
// the answer. Before, the first write to stdout killed mcp-mux with
// SIGPIPE. (Linux: elsewhere stdout is an os.File, whose write on a broken
// stdout still raises SIGPIPE.)
func TestAgentThatClosedStdoutEndsTheSession(t *testing.T) {
	w := startWire(t, testkit.WriteConfig(t, "", []string{"f", "-name", "f"}))
	var kids []int
	testkit.Poll(10*time.Second, func() bool {
		kids = descendantsOf(w.cmd.Process.Pid) // the supervisor and the backend
		return len(kids) >= 2
	})
	w.stdout.Close()
	io.WriteString(w.stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"gone","version":"1"}}}`+"\n")
	select {
	case <-w.exited:
		if w.err != nil {
			t.Fatalf("mcp-mux ended with %v, want exit 0; stderr:\n%s", w.err, w.stderr)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("mcp-mux still runs 5 s after the agent closed its stdout (stdin still open); stderr:\n%s", w.stderr)
	}
	waitGone(t, kids, 2*time.Second)
}

// childrenOf lists pid's live children, from /proc.
func childrenOf(pid int) []int {
	var out []int
	for _, d := range descendantsOf(pid) {
		if ppidOf(d) == pid {
			out = append(out, d)
		}
	}
	return out
}

func ppidOf(pid int) int {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func cmdlineOf(pid int) string {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.ReplaceAll(string(data), "\x00", " ")
}

// An mcp-mux that serves in-process starts a supervisor as soon as it knows
// it serves, the standby, while it makes its Mux; every backend starts
// under it (see backends/internal/supervisor).
func TestBackendsStartUnderTheStandby(t *testing.T) {
	r := runMux(t, testkit.WriteConfig(t, "", []string{"a", "-name", "a"}, []string{"b", "-name", "b"}))
	pids := r.backendPIDs(t)
	sups := childrenOf(r.cmd.Process.Pid)
	if len(sups) != 1 || cmdlineOf(sups[0]) != "mcp-mux-supervisor " {
		t.Fatalf("mcp-mux's children %v, want its one supervisor", sups)
	}
	for _, pid := range pids {
		if ppidOf(pid) != sups[0] {
			t.Errorf("backend %d runs under %d, want the supervisor %d", pid, ppidOf(pid), sups[0])
		}
	}
}

// A launch that will serve in-process, as MCP_MUX_SHARED=0 says before
// main runs, starts its standby, and the standby the process of its first
// backend (mcp-mux-spare), as its Go runtime starts: here mcp-mux is still
// waiting to open its config (a FIFO nobody writes yet) when both run. The
// first backend is that process.
func TestAnInProcessLaunchStartsItsStandbyBeforeReadingItsConfig(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "mcp-mux.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	w := startWire(t, fifo) // MCP_MUX_SHARED=0 (testkit.Main)
	var sup, spare int
	testkit.Eventually(t, 10*time.Second, "a supervisor and its spare while mcp-mux waits for its config", func() bool {
		for _, kid := range childrenOf(w.cmd.Process.Pid) {
			if cmdlineOf(kid) != "mcp-mux-supervisor " {
				continue
			}
			for _, k := range childrenOf(kid) {
				if cmdlineOf(k) == "mcp-mux-spare " {
					sup, spare = kid, k
					return true
				}
			}
		}
		return false
	})
	config := testkit.WriteConfig(t, "", []string{"a", "-name", "a"})
	src, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fifo, src, 0o600); err != nil { // opens the FIFO: mcp-mux reads it
		t.Fatal(err)
	}
	w.initialize()
	w.toolText(2, "a__echo")
	if ppidOf(spare) != sup || !strings.HasPrefix(cmdlineOf(spare), testkit.FixtureBin(t)) {
		t.Errorf("the spare %d is now %q under %d, want the first backend (%s) under the supervisor %d",
			spare, cmdlineOf(spare), ppidOf(spare), testkit.FixtureBin(t), sup)
	}
}

// With no backend process to start (only a remote backend, here one that
// refuses), the standby goes at once: it would only wait.
func TestStandbyGoesWhenNoBackendNeedsIt(t *testing.T) {
	w := startWire(t, testkit.WriteRawConfig(t, "[[backend]]\nname = \"web\"\nurl = \"http://127.0.0.1:9/mcp\"\n"))
	// Answered: mcp-mux is past its start, and so past its backends' start.
	w.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	w.until("the initialize response", isResponse(1))
	var kids []int
	if !testkit.Poll(5*time.Second, func() bool { kids = childrenOf(w.cmd.Process.Pid); return len(kids) == 0 }) {
		t.Fatalf("mcp-mux, with no backend, still has children %v: %q", kids, cmdlineOf(kids[0]))
	}
}

// claudeCodeTerm is when Claude Code follows the SIGINT that stops a
// stdio server with SIGTERM (and 400 ms later with SIGKILL).
const claudeCodeTerm = 100 * time.Millisecond

// twentyBackends runs mcp-mux with 20 fixture backends, as many as a user
// with many servers has: the first with a grandchild, the second one that
// ignores stdin EOF and SIGTERM, the rest plain. It returns mcp-mux, once
// every backend is ready, and every process below it.
func twentyBackends(t *testing.T) (*running, []int) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "grandchild")
	var specs [][]string
	for i := range 20 {
		name := fmt.Sprintf("b%d", i)
		args := []string{name, "-name", name}
		switch i {
		case 0:
			args = append(args, "-grandchild-pidfile", pidfile)
		case 1:
			args = append(args, "-ignore-eof")
		}
		specs = append(specs, args)
	}
	r := runMux(t, testkit.WriteConfig(t, "", specs...))
	pids := r.backendPIDs(t)
	readPidfile(t, pidfile)
	var tree []int
	// The supervisor, each backend under it, and the grandchild.
	testkit.Poll(10*time.Second, func() bool { tree = descendantsOf(r.cmd.Process.Pid); return len(tree) >= len(pids)+2 })
	if len(tree) < len(pids)+2 {
		t.Fatalf("%d processes below mcp-mux, want %d: %v", len(tree), len(pids)+2, tree)
	}
	t.Cleanup(func() {
		for _, pid := range tree {
			if alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return r, tree
}

// endsBeforeClaudeCodeTerm ends mcp-mux with end, as Claude Code does:
// claudeCodeTerm later, unless mcp-mux is exiting by then (t reports it
// if not), it gets SIGTERM, which must change nothing. It logs how long
// mcp-mux took until it was reaped: the kernel's teardown included, which
// on a loaded machine can take longer than mcp-mux's own exit.
func endsBeforeClaudeCodeTerm(t *testing.T, r *running, how string, end func()) {
	t.Helper()
	start := time.Now()
	end()
	select {
	case <-r.exited:
	case <-time.After(claudeCodeTerm):
		if !exiting(r.cmd.Process.Pid) {
			t.Errorf("mcp-mux still busy %v after %s, when Claude Code sends SIGTERM", time.Since(start), how)
		}
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("mcp-mux still running 10 s after %s\nstderr:\n%s", how, r.stderr)
		}
	}
	t.Logf("mcp-mux reaped %v after %s", time.Since(start), how)
	if r.err != nil {
		t.Errorf("mcp-mux ended with %v after %s, want exit 0", r.err, how)
	}
}

// pfExiting is the flag of a task past exit's point of no return (the
// kernel's PF_EXITING), in /proc/PID/task/TID/stat.
const pfExiting = 0x4

// exiting reports whether process pid has exited or is exiting: one of
// its threads has called exit, and what is left is the kernel's teardown,
// which no signal changes.
func exiting(pid int) bool {
	if !alive(pid) {
		return true
	}
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(data)
		// After "pid (comm)": state ppid pgrp session tty_nr tpgid flags.
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 7 {
			continue
		}
		if flags, err := strconv.ParseUint(f[6], 10, 64); err == nil && flags&pfExiting != 0 {
			return true
		}
	}
	return false
}

// TestSignalEndsMuxAtOnceWith20Backends: on the SIGINT (or SIGTERM) an
// agent stops it with, mcp-mux asks every backend to end at once and is
// gone before the agent's next signal; the supervisors finish the job:
// nothing is left, not even what ignores SIGTERM.
func TestSignalEndsMuxAtOnceWith20Backends(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			r, tree := twentyBackends(t)
			endsBeforeClaudeCodeTerm(t, r, sig.String(), func() { signalProcess(t, r.cmd.Process, sig) })
			// SIGTERM at once, SIGKILL 300 ms later (the stubborn one).
			waitGone(t, tree, 5*time.Second)
		})
	}
}

// TestStdinEOFEndsMuxAtOnceAndSupervisorsGiveTheGrace: the agent closing
// stdin is the normal end: mcp-mux is gone at once, and the supervisors
// give the backends shutdown_grace (1 s here) to exit by themselves
// before SIGTERM, then SIGKILL; then nothing is left.
func TestStdinEOFEndsMuxAtOnceAndSupervisorsGiveTheGrace(t *testing.T) {
	r, tree := twentyBackends(t)
	stubborn := 0
	for _, pid := range tree {
		if strings.Contains(cmdlineOf(pid), "-ignore-eof") {
			stubborn = pid
		}
	}
	if stubborn == 0 {
		t.Fatalf("no backend with -ignore-eof among %v", tree)
	}
	endsBeforeClaudeCodeTerm(t, r, "stdin EOF", func() { r.stdin.Close() })
	if !alive(stubborn) {
		t.Errorf("the backend that ignores stdin EOF was gone when mcp-mux had exited: it had not had its shutdown_grace")
	}
	waitGone(t, tree, 5*time.Second)
}

// TestBackendSaysGoodbyeAfterMuxIsGone: a backend that takes a while to
// end after stdin EOF, and then writes to its stdout and stderr, ends as
// it would under an agent: mcp-mux is gone by then, yet the backend does
// not die of SIGPIPE on the way.
func TestBackendSaysGoodbyeAfterMuxIsGone(t *testing.T) {
	done := filepath.Join(t.TempDir(), "done")
	r := runMux(t, testkit.WriteConfig(t, "", []string{"polite", "-name", "polite", "-last-words", done}))
	pids := r.backendPIDs(t)
	r.stdin.Close()
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("mcp-mux still running 10 s after stdin EOF")
	}
	if _, err := os.Stat(done); err == nil {
		t.Fatal("the backend said goodbye before mcp-mux exited: nothing tested")
	}
	if !testkit.Poll(5*time.Second, func() bool { _, err := os.Stat(done); return err == nil }) {
		t.Errorf("the backend never finished: it died saying goodbye after mcp-mux was gone")
	}
	waitGone(t, pids, 5*time.Second)
}
