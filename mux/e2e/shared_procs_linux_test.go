package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A session of the shared mcp-mux relays: of the processes below it there
// is at most the shared process it started (and what that runs). Every
// launch of mcp-mux starts a standby supervisor for the first backend it
// will start, and a session starts none: it was one process more per agent
// session, ten in the benchmark's shared row.
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
	testkit.Poll(5*time.Second, func() bool {
		return len(own(sessions[0])) == 0 && len(own(sessions[1])) == 0
	})
	for i, s := range sessions {
		if left := own(s); len(left) > 0 {
			t.Errorf("session %d (pid %d) runs %s", i, s.cmd.Process.Pid, strings.Join(left, ", "))
		}
	}
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
