package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A session of the shared mcp-mux relays: it starts no process of its
// own, not even for a moment. Of the processes below it there is at most
// the shared process it started (and what that runs), and it never reaped
// a child: a child it had and reaped counts in its stat's cminflt. Every
// launch of mcp-mux started a standby supervisor for the first backend it
// would start: a session that kept it ran one process more per agent (ten
// in the benchmark's shared row), and one that let it go still paid a fork
// and exec at every agent's launch.
func TestASharedSessionRunsNoProcessOfItsOwn(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	sessions := []*sharedSession{startShared(t, cfg, dir, nil, nil), startShared(t, cfg, dir, nil, nil)}
	for i, s := range sessions {
		s.call(t, "fx__echo", map[string]any{"n": i})
	}
	shared := onlyShared(t).PID
	own := func(s *sharedSession) []string {
		below := append(descendantsOf(shared), shared)
		var out []string
		for _, p := range descendantsOf(s.cmd.Process.Pid) {
			if !slices.Contains(below, p) {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
				out = append(out, fmt.Sprintf("%s (pid %d)", strings.TrimSpace(string(comm)), p))
			}
		}
		return out
	}
	// Until every child but the shared process is reaped (a zombie is
	// still a child): the count is final then.
	settled := func(s *sharedSession) bool {
		kids := childrenWithZombies(s.cmd.Process.Pid)
		return len(own(s)) == 0 && !slices.ContainsFunc(kids, func(p int) bool { return p != shared })
	}
	testkit.Poll(5*time.Second, func() bool { return settled(sessions[0]) && settled(sessions[1]) })
	for i, s := range sessions {
		if left := own(s); len(left) > 0 {
			t.Errorf("session %d (pid %d) runs %s", i, s.cmd.Process.Pid, strings.Join(left, ", "))
		}
		if n := reapedChildFaults(s.cmd.Process.Pid); n != 0 {
			t.Errorf("session %d (pid %d) started a process and reaped it (its children's minor faults: %d)", i, s.cmd.Process.Pid, n)
		}
	}
}

// childrenWithZombies is pid's children, the ended ones not yet reaped
// included.
func childrenWithZombies(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err == nil && ppidOf(child) == pid {
			out = append(out, child)
		}
	}
	return out
}

// reapedChildFaults is the minor faults of the children pid waited for
// (cminflt, /proc/PID/stat): 0 as long as it reaped none, since every
// process faults at its start.
func reapedChildFaults(pid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 9 {
		return -1
	}
	n, _ := strconv.Atoi(f[8])
	return n
}

// The shared process runs one supervisor for all its backends (the
// benchmark's ten sessions with five npm servers ran five), and a kill -9
// of it still leaves nothing: no backend, and nothing one of them started,
// setsid and orphaned by a double fork included.
func TestFiveBackendsOfTheSharedProcessRunUnderOneSupervisor(t *testing.T) {
	sharedDirs(t)
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("[mux]\nshutdown_grace = \"1s\"\n\n")
	for _, name := range []string{"a", "b", "c", "d"} {
		fmt.Fprintf(&cfg, "[[backend]]\nname = %q\ncommand = %q\nargs = [\"-name\", %q]\n\n", name, testkit.FixtureBin(t), name)
	}
	pidfile := filepath.Join(dir, "orphan")
	fmt.Fprintf(&cfg, "[[backend]]\nname = \"orphan\"\ncommand = \"/bin/sh\"\nargs = [\"-c\", %q, \"sh\", %q, %q]\n",
		`(setsid sleep 1000 & echo $! > "$1"); exec "$2" -name orphan`, pidfile, testkit.FixtureBin(t))
	s := startShared(t, testkit.WriteRawConfig(t, cfg.String()), dir, nil, nil)
	for _, name := range []string{"a", "b", "c", "d", "orphan"} {
		s.call(t, name+"__echo", map[string]any{"n": name})
	}
	shared := onlyShared(t).PID
	escapee := readPidfile(t, pidfile)[0]
	fx := fixturesUnder(t, shared)
	if len(fx) != 5 {
		t.Fatalf("%d fixtures below the shared process, want 5: %v", len(fx), fx)
	}
	sups := map[int]bool{}
	for _, p := range fx {
		sups[ppidOf(p)] = true
	}
	if len(sups) != 1 {
		t.Errorf("five backends of the shared process run under %d supervisors, want 1", len(sups))
	}
	for sup := range sups {
		if ppidOf(sup) != shared || !strings.HasPrefix(cmdlineOf(sup), "mcp-mux-supervisor") {
			t.Errorf("the backends' parent %d (%q) is not a supervisor of the shared process %d", sup, cmdlineOf(sup), shared)
		}
	}
	all := append(descendantsOf(shared), escapee)
	t.Cleanup(func() {
		for _, p := range all {
			if alive(p) {
				killProcess(p)
			}
		}
	})
	killProcess(shared)
	waitGone(t, all, 5*time.Second)
}

// When its last session ends (no linger), the shared process ends as an
// in-process mcp-mux ends at stdin EOF: at once, leaving its backends to
// the supervisor, which closes their stdin and gives them shutdown_grace
// to exit by themselves. Before, the class's Mux and the process's end
// raced: either the process waited while it stopped the backends one by
// one, each within shutdown_grace, or it exited first and its backends
// were killed with no grace at all.
func TestTheSharedProcessEndsWithItsLastSessionAtOnce(t *testing.T) {
	sharedDirs(t)
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("[mux]\nshutdown_grace = \"3s\"\n\n")
	words := map[string]string{}
	for _, name := range []string{"a", "b"} {
		words[name] = filepath.Join(dir, name+".done")
		// Each takes 300 ms to end after stdin EOF, as a server that
		// saves its state does, then writes its last words.
		fmt.Fprintf(&cfg, "[[backend]]\nname = %q\ncommand = %q\nargs = [\"-name\", %q, \"-last-words\", %q]\n\n", name, testkit.FixtureBin(t), name, words[name])
	}
	fmt.Fprintf(&cfg, "[[backend]]\nname = \"stubborn\"\ncommand = %q\nargs = [\"-name\", \"stubborn\", \"-ignore-eof\"]\n", testkit.FixtureBin(t))
	s := startShared(t, testkit.WriteRawConfig(t, cfg.String()), dir, nil, nil)
	for _, name := range []string{"a", "b", "stubborn"} {
		s.call(t, name+"__echo", map[string]any{"n": name})
	}
	shared := onlyShared(t).PID
	all := append(descendantsOf(shared), shared)
	stubborn := 0
	for _, p := range all {
		if strings.Contains(cmdlineOf(p), "-ignore-eof") {
			stubborn = p
		}
	}
	t.Cleanup(func() {
		for _, p := range all {
			if alive(p) {
				killProcess(p)
			}
		}
	})
	start := time.Now()
	s.end(t)
	testkit.Poll(10*time.Second, func() bool { return !alive(shared) })
	exited := time.Since(start)
	stubbornThen := alive(stubborn)
	testkit.Poll(10*time.Second, func() bool {
		_, errA := os.Stat(words["a"])
		_, errB := os.Stat(words["b"])
		return errA == nil && errB == nil
	})
	ended := time.Since(start)
	waitGone(t, all, 10*time.Second)
	t.Logf("after the last session's stdin closed: the shared process gone in %v, the backends that end by themselves in %v, everything in %v", exited, ended, time.Since(start))
	// Its own exit is a few milliseconds; the rest is for a loaded machine.
	if exited > 1500*time.Millisecond {
		t.Errorf("the shared process took %v to go after its last session, want well under shutdown_grace (3 s)", exited)
	}
	if !stubbornThen {
		t.Error("the backend that ignores stdin EOF was gone when the shared process was: it had not had its shutdown_grace")
	}
	for name, path := range words {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("backend %s did not end by itself (no last words): it was not given its grace", name)
		}
	}
}
