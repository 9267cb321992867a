package backends

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/log"

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

// childrenOf is pid's children, from /proc.
func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// spareOf waits for the process the supervisor sup forks ahead of its first
// backend, and returns its pid.
func spareOf(t *testing.T, sup int) int {
	t.Helper()
	spare := 0
	testkit.Eventually(t, 10*time.Second, "the standby's spare (mcp-mux-spare)", func() bool {
		for _, pid := range childrenOf(sup) {
			if cmdlineOf(pid) == "mcp-mux-spare " {
				spare = pid
				return true
			}
		}
		return false
	})
	return spare
}

// The first backend is the process the supervisor forked and exec'd as it
// started (mcp-mux-spare in ps), in the backend's directory, with its stdio:
// the exec of mcp-mux's binary that makes a backend a subreaper is not on
// the start of the backend an agent waits for. The next is forked as it
// comes, and no idle process stays beside the two.
func TestTheFirstBackendIsTheProcessForkedAheadOfIt(t *testing.T) {
	sup := withStandby(t)
	spare := spareOf(t, sup)
	dir := t.TempDir()
	b, err := Start(context.Background(), Spec{Name: "fx", Command: testkit.FixtureBin(t), Args: []string{"-cwd-tool"}, Cwd: dir},
		Options{StartupTimeout: 10 * time.Second, Logger: log.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })
	if b.PID() != spare {
		t.Errorf("the first backend is %d (%q), want the spare %d", b.PID(), cmdlineOf(b.PID()), spare)
	}
	if res, err := call(t, b, "cwd", nil); err != nil || resultText(t, res) != dir {
		t.Errorf("the first backend's directory: %v, %v; want %s", res, err, dir)
	}
	next, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := childrenOf(sup)
	slices.Sort(got)
	want := []int{b.PID(), next.PID()}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the supervisor's children are %v, want the two backends %v and no other", got, want)
	}
}

// A backend whose directory cannot be entered fails to start with a reason
// that names it, the first (the spare) as the next (forked).
func TestABackendsFailureToEnterItsDirectoryNamesIt(t *testing.T) {
	sup := withStandby(t)
	spareOf(t, sup)
	dir := filepath.Join(t.TempDir(), "gone")
	for _, which := range []string{"the first", "the next"} {
		b, err := Start(context.Background(), Spec{Name: "fx", Command: testkit.FixtureBin(t), Cwd: dir},
			Options{StartupTimeout: 10 * time.Second, Logger: log.New(io.Discard)})
		if err == nil {
			b.Stop(time.Second)
			t.Fatalf("%s backend, whose directory does not exist, started", which)
		}
		if !strings.Contains(err.Error(), "chdir "+dir+": no such file or directory") {
			t.Errorf("%s backend: error %q, want it to say chdir %s: no such file or directory", which, err, dir)
		}
	}
	if _, _, err := start(t, Options{}); err != nil {
		t.Errorf("a backend after those: %v", err)
	}
}

// A spare goes with its supervisor: a standby let go leaves nothing.
func TestADiscardedStandbyTakesItsSpare(t *testing.T) {
	sup := withStandby(t)
	spare := spareOf(t, sup)
	supervisor.DiscardStandby()
	if !testkit.Poll(5*time.Second, func() bool { return !alive(sup) && !alive(spare) }) {
		t.Fatalf("after the standby %d was let go, it runs: %v, its spare %d: %v", sup, alive(sup), spare, alive(spare))
	}
}

// The session's name for the variable is the supervisor's.
func TestStandbyEnvIsTheSupervisors(t *testing.T) {
	if StandbyEnv != supervisor.StandbyEnv {
		t.Errorf("backends.StandbyEnv %q, supervisor.StandbyEnv %q", StandbyEnv, supervisor.StandbyEnv)
	}
}

// A spare killed before the first backend came costs nothing but itself:
// that backend is forked, under the same supervisor.
func TestABackendStartsWhenItsSpareWasKilled(t *testing.T) {
	sup := withStandby(t)
	spare := spareOf(t, sup)
	syscall.Kill(spare, syscall.SIGKILL)
	testkit.Eventually(t, 10*time.Second, "the killed spare to be reaped", func() bool { return !alive(spare) })
	b, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.PID() == spare || parentOf(t, b.PID()) != sup {
		t.Errorf("backend %d under %d, want a new process under the supervisor %d", b.PID(), parentOf(t, b.PID()), sup)
	}
	if res, err := call(t, b, "echo", map[string]any{"x": 1}); err != nil || !strings.Contains(fmt.Sprint(res.Content[0]), `{"x":1}`) {
		t.Errorf("echo: %v, %v", res, err)
	}
}
