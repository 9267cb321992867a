package e2e

import (
	"fmt"
	"os"
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
