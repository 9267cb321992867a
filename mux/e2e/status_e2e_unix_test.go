//go:build !windows

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// fakeEndpoint listens at path with mode, answering as an mcp-mux would,
// with a document whose config and backend are named marker: what a
// socket of another user's could make status show.
func fakeEndpoint(t *testing.T, path string, mode os.FileMode, marker string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(map[string]any{"version": 1, "pid": os.Getpid(), "config": marker,
		"sessions": []any{}, "backends": []any{map[string]any{"name": marker, "state": "ready"}}})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write(append(doc, '\n'))
			c.Close()
		}
	}()
}

// TestStatusShowsNothingOfAnotherUsersSocket: beside a real mcp-mux, a
// socket that answers but that others may open (mode 0666), and run as
// root one owned by another uid, are not shown by status, plain or
// --json; stderr says why each was skipped.
func TestStatusShowsNothingOfAnotherUsersSocket(t *testing.T) {
	dir := statusDir(t)
	r := runMux(t, testkit.WriteConfig(t, "", []string{"alpha", "-name", "alpha"}))
	own := filepath.Join(dir, strconv.Itoa(r.cmd.Process.Pid)+".sock")
	testkit.Eventually(t, 10*time.Second, "the mcp-mux's socket", func() bool { _, err := os.Lstat(own); return err == nil })
	// Live pids, so that only the check keeps them out: the test's own
	// and its parent's.
	open := filepath.Join(dir, strconv.Itoa(os.Getpid())+".sock")
	fakeEndpoint(t, open, 0o666, "open-to-all")
	var foreign string
	if os.Geteuid() == 0 {
		foreign = filepath.Join(dir, strconv.Itoa(os.Getppid())+".sock")
		fakeEndpoint(t, foreign, 0o600, "another-user")
		if err := os.Chown(foreign, 12345, 12345); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Log("not root: the socket of another owner is not made")
	}
	out, errOut, code := runStatus(t)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("mcp-mux pid %d, ", r.cmd.Process.Pid)) {
		t.Fatalf("the real mcp-mux is not shown (exit %d):\n%s\nstderr:\n%s", code, out, errOut)
	}
	js, _, _ := runStatus(t, "--json")
	for _, marker := range []string{"open-to-all", "another-user"} {
		if strings.Contains(out, marker) || strings.Contains(js, marker) {
			t.Errorf("status shows the %s socket:\n%s\n%s", marker, out, js)
		}
	}
	if !strings.Contains(errOut, "skipping "+open+": mode 0666, not 0600") {
		t.Errorf("stderr does not say why %s was skipped: %q", open, errOut)
	}
	if foreign != "" && !strings.Contains(errOut, "skipping "+foreign+": owned by uid 12345, not by you") {
		t.Errorf("stderr does not say why %s was skipped: %q", foreign, errOut)
	}
	if _, err := os.Lstat(open); err != nil {
		t.Errorf("status removed a socket that is not the user's alone: %v", err)
	}
}

// TestKilledMuxLeavesNoStaleEndpoint: an mcp-mux killed with SIGKILL
// leaves its socket; the next mcp-mux removes it as it starts, and the
// next status removes the one the second leaves, and says none runs.
func TestKilledMuxLeavesNoStaleEndpoint(t *testing.T) {
	dir := statusDir(t)
	cfg := testkit.WriteConfig(t, "", []string{"alpha", "-name", "alpha"})
	killed := func() string {
		r := runMux(t, cfg)
		sock := filepath.Join(dir, strconv.Itoa(r.cmd.Process.Pid)+".sock")
		testkit.Eventually(t, 10*time.Second, "the mcp-mux's socket", func() bool { _, err := os.Lstat(sock); return err == nil })
		r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.exited
		if _, err := os.Lstat(sock); err != nil {
			t.Fatalf("the killed mcp-mux's socket is gone already (%v): the test shows nothing", err)
		}
		return sock
	}
	first := killed()
	second := killed() // its start removed first's
	if _, err := os.Lstat(first); err == nil {
		t.Errorf("the next mcp-mux left %s, of a killed one", first)
	}
	out, errOut, code := runStatus(t)
	if code != 0 || out != "no mcp-mux is running\n" || errOut != "" {
		t.Errorf("status: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Lstat(second); err == nil {
		t.Errorf("status left %s, of a killed mcp-mux", second)
	}
}

// TestStatusWatchOffATerminalPrintsPlainFrames: --watch with stdout not a
// terminal prints the status again each second, plain, without escape
// codes, until SIGINT ends it with exit 0.
func TestStatusWatchOffATerminalPrintsPlainFrames(t *testing.T) {
	statusDir(t)
	runMux(t, testkit.WriteConfig(t, "", []string{"alpha", "-name", "alpha"}))
	cmd := exec.Command(testkit.MuxBin(t), "status", "--watch")
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	testkit.Eventually(t, 15*time.Second, "three frames with alpha", func() bool {
		s := out.String()
		return strings.Count(s, "\n--- ") >= 2 && strings.Count(s, "  alpha ") >= 3
	})
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("status --watch ended by SIGINT: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("status --watch still running 10 s after SIGINT")
	}
	if strings.ContainsRune(out.String(), 0x1b) {
		t.Errorf("escape codes off a terminal:\n%q", out.String())
	}
}
