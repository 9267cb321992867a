package e2e

import (
	"io"
	"os"
	"strconv"
	"strings"
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

// mcp-mux starts a supervisor at its own start, the standby, while it is
// still initializing; the first backend starts under it, the others under
// supervisors of their own (see backends/internal/supervisor).
func TestFirstBackendStartsUnderTheStandby(t *testing.T) {
	r := runMux(t, testkit.WriteConfig(t, "", []string{"a", "-name", "a"}, []string{"b", "-name", "b"}))
	r.backendPIDs(t)
	var standby, own int
	for _, sup := range childrenOf(r.cmd.Process.Pid) {
		switch cmd := cmdlineOf(sup); {
		case cmd == "mcp-mux-supervisor standby ":
			standby++
		case strings.HasPrefix(cmd, "mcp-mux-supervisor "+testkit.FixtureBin(t)):
			own++
		default:
			t.Errorf("mcp-mux's child %d: %q", sup, cmd)
		}
		if len(childrenOf(sup)) != 1 {
			t.Errorf("supervisor %d (%q) has children %v, want its backend", sup, cmdlineOf(sup), childrenOf(sup))
		}
	}
	if standby != 1 || own != 1 {
		t.Errorf("%d backends under the standby and %d under their own supervisor, want 1 and 1", standby, own)
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
