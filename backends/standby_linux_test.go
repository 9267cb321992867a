package backends

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/backends/internal/supervisor"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// withStandby starts a standby supervisor, as mcp-mux does at its start
// (a test binary does not), for the next backend to take: the supervisor
// of the backends started after it.
func withStandby(t *testing.T) int {
	t.Helper()
	freshSupervisor(t)
	pid, ok := supervisor.StartStandby()
	if !ok {
		t.Fatal("no standby supervisor")
	}
	t.Cleanup(supervisor.DiscardStandby) // if no backend took it
	return pid
}

// freshSupervisor has the next backend start under a supervisor other
// than the one that runs, if any (which serves its backends on).
func freshSupervisor(t *testing.T) {
	t.Helper()
	current.Lock()
	current.conn = nil
	current.Unlock()
}

func cmdlineOf(pid int) string {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.ReplaceAll(string(data), "\x00", " ")
}

// The next backend starts under the standby: the supervisor (mcp-mux's
// child, the backend's parent), which the one after runs under too.
func TestBackendStartsUnderTheStandby(t *testing.T) {
	sup := withStandby(t)
	b, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := parentOf(t, b.PID()); got != sup || parentOf(t, sup) != os.Getpid() {
		t.Errorf("backend %d has parent %d, want the standby %d (a child of ours, %d)", b.PID(), got, sup, os.Getpid())
	}
	if got := cmdlineOf(sup); got != supervisor.Arg0+" " {
		t.Errorf("the standby's cmdline %q", got)
	}
	if res, err := call(t, b, "echo", map[string]any{"x": 1}); err != nil || !strings.Contains(fmt.Sprint(res.Content[0]), `{"x":1}`) {
		t.Errorf("echo through the standby's backend: %v, %v", res, err)
	}
	next, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := parentOf(t, next.PID()); got != sup {
		t.Errorf("the next backend runs under %d (%q), want the standby %d too", got, cmdlineOf(got), sup)
	}
}

// A standby that no backend needs ends when its lifeline does.
func TestDiscardedStandbyEnds(t *testing.T) {
	pid := withStandby(t)
	supervisor.DiscardStandby()
	if !testkit.Poll(5*time.Second, func() bool { return !alive(pid) }) {
		t.Fatalf("the discarded standby %d still runs", pid)
	}
}

// A standby that died before it was needed costs nothing but itself: the
// backend gets a new supervisor.
func TestBackendStartsWhenTheStandbyDied(t *testing.T) {
	pid := withStandby(t)
	syscall.Kill(pid, syscall.SIGKILL)
	testkit.Eventually(t, 10*time.Second, "the killed standby to be gone", func() bool { return !alive(pid) })
	b, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sup := parentOf(t, b.PID()); sup == pid || cmdlineOf(sup) != supervisor.Arg0+" " {
		t.Errorf("the backend's supervisor is %d (%q), want a new one", sup, cmdlineOf(sup))
	}
}
