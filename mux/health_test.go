package mux

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// TestABackendGoingDownAndBackIsOneLineEach: the agent's own status of
// mcp-mux says it is connected whatever its backends do, so the log says
// in one line when a backend goes down and when it is back, with how many
// serve.
func TestABackendGoingDownAndBackIsOneLineEach(t *testing.T) {
	var buf testkit.SyncBuffer
	m := New(testConfig(fixture(t, "notes"), fixture(t, "tasks")), log.New(&buf), "test")
	m.backoffBase = 10 * time.Millisecond
	m.Start()
	t.Cleanup(m.Close)
	cs := connect(t, m, nil)
	toolNames(t, cs)
	// The call fails: the backend exits while serving it.
	_, _ = cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__crash"})
	testkit.Eventually(t, 10*time.Second, "notes back", func() bool {
		return strings.Contains(buf.String(), "backends: notes is back")
	})
	log := buf.String()
	down := strings.Index(log, "backends: notes is down (restarting) serving=\"1 of 2\" down=\"notes (restarting)\"")
	back := strings.Index(log, "backends: notes is back serving=\"2 of 2\"")
	if down < 0 || back < down {
		t.Errorf("want one line for notes down (1 of 2 serving), then one for it back (2 of 2):\n%s", log)
	}
}
