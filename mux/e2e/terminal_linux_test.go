package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// mcp-mux never queries the terminal, and never waits on it: on a terminal
// that does not answer colour queries (script(1), some CI and editor
// ptys), serving and check --connect stalled 10 s before anything else,
// and wrote ESC]10;? ESC]11;? ESC[6n into the user's terminal (the colour
// detection of the log's styling library).

// silentPTY is a pseudo-terminal whose other end records what is written
// to it and never answers.
type silentPTY struct {
	master, slave *os.File
	mu            sync.Mutex
	seen          bytes.Buffer
	done          chan struct{}
}

func newSilentPTY(t *testing.T) *silentPTY {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pty: %v", err)
	}
	p := &silentPTY{master: master, slave: slave, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.seen.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		slave.Close()
		master.Close()
		<-p.done
	})
	return p
}

// onTerminal makes cmd's stderr (the pty) its controlling terminal, with
// cmd in the foreground, as a program run in a terminal is: only then does
// a program that queries a terminal do so.
func onTerminal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 2}
	// CI=... makes the styling library take any output for no terminal.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "CI=") })
}

func (p *silentPTY) written() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen.String()
}

// terminalQueries are the queries a program sends a terminal to learn its
// colours and the cursor position.
var terminalQueries = []string{"\x1b]10;?", "\x1b]11;?", "\x1b[6n"}

func TestServingWithStderrOnASilentTerminalNeitherQueriesNorWaits(t *testing.T) {
	pty := newSilentPTY(t)
	cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"})
	cmd := exec.Command(testkit.MuxBin(t), "--config", cfg)
	cmd.Stderr = pty.slave
	onTerminal(cmd)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	start := time.Now()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	line := make(chan string, 1)
	go func() {
		var b [1 << 16]byte
		n, _ := stdout.Read(b[:])
		line <- string(b[:n])
	}()
	select {
	case got := <-line:
		if !strings.Contains(got, `"id":1`) {
			t.Errorf("initialize answered with %q", got)
		}
	case <-time.After(8 * time.Second):
		t.Fatalf("no answer to initialize within 8 s; the terminal got %q", pty.written())
	}
	elapsed := time.Since(start)
	stdin.Close()
	cmd.Wait()
	t.Logf("initialize answered after %v, exit after %v", elapsed, time.Since(start))
	for _, q := range terminalQueries {
		if strings.Contains(pty.written(), q) {
			t.Errorf("mcp-mux wrote the terminal query %q (initialize answered after %v):\n%q", q, elapsed, pty.written())
		}
	}
	if !strings.Contains(pty.written(), "config loaded") {
		t.Errorf("the log did not reach the terminal: %q", pty.written())
	}
}

func TestCheckConnectOnASilentTerminalNeitherQueriesNorWaits(t *testing.T) {
	pty := newSilentPTY(t)
	cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"})
	cmd := exec.Command(testkit.MuxBin(t), "check", "--connect", "--config", cfg)
	cmd.Stdout, cmd.Stderr = pty.slave, pty.slave
	onTerminal(cmd)
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("check --connect: %v\n%q", err, pty.written())
		}
	case <-time.After(8 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("check --connect did not end within 8 s; the terminal got %q", pty.written())
	}
	for _, q := range terminalQueries {
		if strings.Contains(pty.written(), q) {
			t.Errorf("check --connect wrote the terminal query %q:\n%q", q, pty.written())
		}
	}
}

// TestEachSkippedGroupIsSaidOnTheTerminal: go test shows nothing of a
// package that passes, so a group of tests that skips for want of a tool
// (node, haproxy, fish) says so on the terminal, one line each, without -v.
func TestEachSkippedGroupIsSaidOnTheTerminal(t *testing.T) {
	pty := newSilentPTY(t)
	// This test binary again, running no test: only TestMain speaks. An
	// empty PATH takes node, haproxy and fish away.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	onTerminal(cmd)
	cmd.Env = append(slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }), "PATH="+t.TempDir())
	cmd.Stderr = pty.slave
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []string{
		"mux/e2e: the interop suite is skipped: node is not on PATH",
		"mux/e2e: the fish completion test is skipped: fish is not on PATH",
	}
	if _, err := findHAProxy(); err != "" {
		want = append(want, "mux/e2e: the load balancer test is skipped: haproxy is not installed")
	}
	for _, w := range want {
		if n := strings.Count(pty.written(), w); n != 1 {
			t.Errorf("%q said %d times on the terminal, want once:\n%s", w, n, pty.written())
		}
	}
}
