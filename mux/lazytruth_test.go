package mux

import (
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// What a remembered catalog shows must be true: a name it lacks is
// unknown, a backend that cannot start leaves the lists, and what is not
// known of a backend at rest is not said.

// A typo under the prefix of a backend at rest is an unknown tool, as it
// is for the same backend running: its catalog is known, and lacks it.
func TestATypoUnderARememberedBackendIsAnUnknownTool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	cfg := testConfig(fixture(t, "fx"))
	learn(t, cfg, path)
	m := runWithMemory(t, cfg, path)
	cs := connect(t, m, nil)
	typo := &mcp.CallToolParams{Name: "fx__echp", Arguments: map[string]any{"text": "x"}}
	_, err := cs.CallTool(testkit.CtxT(t), typo)
	atRest := rpcCode(t, err)
	if state, _ := stateOf(m, "fx"); state != stateRemembered {
		t.Fatalf("fx is %q after a call to a name it lacks: want it still at rest", state)
	}
	callText(t, cs, "fx__echo", map[string]any{"text": "wake"})
	_, err = cs.CallTool(testkit.CtxT(t), typo)
	running := rpcCode(t, err)
	if atRest.Code != running.Code || atRest.Message != running.Message {
		t.Errorf("at rest: %d %q\nrunning: %d %q\nwant the same error", atRest.Code, atRest.Message, running.Code, running.Message)
	}
}
