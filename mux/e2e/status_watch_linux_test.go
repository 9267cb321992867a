package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// TestStatusWatchOnATerminalRedrawsUntilQ: on a terminal, --watch is a
// screen redrawn about once a second (its clock line is written again),
// showing the backends, that never queries the terminal; q ends it with
// exit 0, leaving the last status printed.
func TestStatusWatchOnATerminalRedrawsUntilQ(t *testing.T) {
	statusDir(t)
	runMux(t, testkit.WriteConfig(t, "", []string{"alpha", "-name", "alpha"}))
	pty := newSilentPTY(t)
	cmd := exec.Command(testkit.MuxBin(t), "status", "--watch")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pty.slave, pty.slave, pty.slave
	onTerminal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	testkit.Eventually(t, 15*time.Second, "two redraws showing alpha", func() bool {
		s := pty.written()
		return strings.Count(s, "mcp-mux status at ") >= 2 && strings.Contains(s, "alpha") && strings.Contains(s, "q quits")
	})
	if _, err := pty.master.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("status --watch ended by q: %v\n%q", err, pty.written())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("status --watch still running 10 s after q:\n%q", pty.written())
	}
	for _, q := range terminalQueries {
		if strings.Contains(pty.written(), q) {
			t.Errorf("status --watch wrote the terminal query %q:\n%q", q, pty.written())
		}
	}
	// It left the alternate screen, and the last status is on the main one.
	s := pty.written()
	end := strings.LastIndex(s, "\x1b[?1049l")
	if end < 0 || !strings.Contains(s[end:], "  alpha ") {
		t.Errorf("after q, the last status is not left on the terminal:\n%q", s)
	}
}
