package mux

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/mux/agents"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A backend that its config entry keeps from running is in the
// instructions of the very first initialize, every time: initialize may
// come before its goroutine ever ran (mcp-mux reads the agent's
// initialize as soon as it starts, and answers at once when it knows
// every backend's instructions from the last run, or [mux] instructions
// replaces them).
func TestABrokenBackendIsInTheFirstInstructionsEveryTime(t *testing.T) {
	const why = "test.toml:5: backend #1 (slack).env.TOKEN: ${SLACK_TOKEN} is not set"
	broken := config.Backend{Name: "slack", Command: testkit.FixtureBin(t), Broken: why}
	for _, set := range []string{"", "Only what the user wrote."} {
		missed := 0
		const runs = 100
		for range runs {
			cfg := testConfig(broken)
			cfg.Mux.Instructions = set
			m := New(cfg, testLogger(t), "test")
			// It ran before under this name and command: its
			// instructions are known, so initialize does not wait.
			m.instr.mu.Lock()
			m.instr.entries[instructionKey(broken)] = remembered{Instructions: "Post to channels.", Seen: time.Now()}
			m.instr.mu.Unlock()
			m.Start()
			got := m.waitInstructions(testkit.CtxT(t), nil, agents.Agent{}, time.Time{})
			m.Close()
			if !strings.Contains(got, `backend "slack" is not running: `+why) {
				missed++
			}
		}
		if missed > 0 {
			t.Errorf("[mux] instructions %q: %d of %d first initializes lack the broken backend", set, missed, runs)
		}
	}
}

// A broken backend whose name cannot be its own (an earlier backend's, or
// not a valid name) is named by its place, and the messages say which
// entry that is, once: not "backend backend #2".
func TestABackendNamedByItsPlaceReadsNaturally(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	text := backendTOML(t, "memory") + backendTOML(t, "memory", `env = { A = "${MCP_MUX_TEST_NEVER_SET}" }`) +
		strings.Replace(backendTOML(t, "notes"), `name = "notes"`, `name = "my notes"`, 1)
	cfg, err := config.ParseForServing(path, []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Mux = testConfig().Mux
	instr := connect(t, startMuxConfig(t, cfg), nil).InitializeResult().Instructions
	for _, want := range []string{
		`- backend #2 ("memory", a duplicate name) is not running: ` + path + `:`,
		`- backend #3 ("my notes", an invalid name) is not running: ` + path + `:`,
	} {
		if !strings.Contains(instr, want) {
			t.Errorf("instructions lack %q:\n%s", want, instr)
		}
	}
	if strings.Contains(instr, "backend backend") {
		t.Errorf("instructions say \"backend backend\":\n%s", instr)
	}
}
