package main

import (
	"io"
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
	w := startWire(t, writeConfig(t, "", []string{"f", "-name", "f"}))
	var kids []int
	for deadline := time.Now().Add(10 * time.Second); len(kids) < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		kids = descendantsOf(w.cmd.Process.Pid) // the supervisor and the backend
	}
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
