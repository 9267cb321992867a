package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// TestTheSharedProcessOnWindows: three sessions of one config at once
// meet one shared mcp-mux over its named pipe and share one backend; a
// TerminateProcess of it (kill -9) fails the call in flight, ends its
// backend (the job object) and the next call goes through a new one; a
// session process killed ends its share only; the sessions' stdin closing
// ends it and its backend. What is seen is what
// status --json says: Windows has no /proc.
func TestTheSharedProcessOnWindows(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	sessions, doc := startSharedAtOnce(t, 3, cfg, dir)
	if len(doc.Sessions) != 3 || len(doc.Backends) != 1 || doc.Backends[0].PID == 0 {
		t.Fatalf("status shows %d sessions and backends %+v, want 3 sessions of one backend with a pid", len(doc.Sessions), doc.Backends)
	}
	backend := doc.Backends[0].PID

	s := sessions[0]
	arrived := testkit.Arrived(func() int { return testkit.Requests(s.call(t, "fx__stats", nil)) })
	errc := make(chan error, 1)
	go func() {
		_, err := s.cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__sleep", Arguments: map[string]any{"ms": 30000}})
		errc <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the sleep in flight", arrived)
	killProcess(doc.PID)
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "ended while this request was in flight") {
			t.Fatalf("the call in flight ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the call in flight was not answered 10 s after TerminateProcess\nstderr:\n%s", s.stderr)
	}
	for i, s := range sessions {
		if got := s.call(t, "fx__echo", map[string]any{"after": i}); !strings.Contains(got, fmt.Sprint(i)) {
			t.Errorf("session %d's echo after TerminateProcess: %q", i, got)
		}
	}
	next := onlyShared(t)
	if next.PID == doc.PID || len(next.Sessions) != 3 || len(next.Backends) != 1 || next.Backends[0].PID == 0 {
		t.Fatalf("after TerminateProcess of %d: shared process %d with %d sessions and backends %+v, want a new one with 3 sessions of one backend", doc.PID, next.PID, len(next.Sessions), next.Backends)
	}
	testkit.Eventually(t, 10*time.Second, "the killed process's backend gone", func() bool { return !alive(backend) })

	// An agent's session process killed: its share ends, the others' goes on.
	sessions[2].cmd.Process.Kill()
	testkit.Eventually(t, 10*time.Second, "two sessions left", func() bool {
		d := sharedProcs(t)
		return len(d) == 1 && d[0].PID == next.PID && len(d[0].Sessions) == 2
	})
	sessions[1].call(t, "fx__echo", nil)
	for _, s := range sessions[:2] {
		s.end(t)
	}
	testkit.Eventually(t, 10*time.Second, "the shared process and its backend gone", func() bool {
		return !alive(next.PID) && !alive(next.Backends[0].PID)
	})
}
