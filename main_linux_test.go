package main

import (
	"io"
	"os/exec"
	"testing"
	"time"
)

// An agent that closed mcp-mux's stdout (its reading end) is gone: the
// session ends as at stdin EOF, mcp-mux exits 0 and stops its backends,
// and no request is forwarded to a backend for an agent that cannot see
// the answer. Before, the first write to stdout killed mcp-mux with
// SIGPIPE. (Linux: elsewhere stdout is an os.File, whose write on a broken
// stdout still raises SIGPIPE.)
func TestAgentThatClosedStdoutEndsTheSession(t *testing.T) {
	cmd := exec.Command(muxBin, "--config", writeConfig(t, "", []string{"f", "-name", "f"}))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := newLockedBuf()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	var kids []int
	for deadline := time.Now().Add(10 * time.Second); len(kids) < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		kids = descendantsOf(cmd.Process.Pid) // the supervisor and the backend
	}
	stdout.Close()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"gone","version":"1"}}}`+"\n")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("mcp-mux ended with %v, want exit 0; stderr:\n%s", err, stderr)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("mcp-mux still runs 5 s after the agent closed its stdout (stdin still open); stderr:\n%s", stderr)
	}
	waitGone(t, kids, 2*time.Second)
	stdin.Close()
}
