package config

import (
	"testing"
	"time"
)

// drain_timeout: absent, a little under the 30 s an orchestrator waits
// after SIGTERM; set, what it says; a mistake names its line.
func TestDrainTimeout(t *testing.T) {
	cfg, ps := parseString(t, "[[backend]]\nname = \"b\"\ncommand = \"go\"\n", noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	if got := cfg.Mux.DrainTimeout.Duration; got != 25*time.Second {
		t.Errorf("drain_timeout absent: %s, want 25s", got)
	}
	cfg, ps = parseString(t, "[mux]\ndrain_timeout = \"5s\"\n[[backend]]\nname = \"b\"\ncommand = \"go\"\n", noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	if got := cfg.Mux.DrainTimeout.Duration; got != 5*time.Second {
		t.Errorf("drain_timeout = \"5s\": %s", got)
	}
	_, ps = parseString(t, "[mux]\nname = \"x\"\ndrain_timeout = \"-1s\"\n[[backend]]\nname = \"b\"\ncommand = \"go\"\n", noEnv)
	checkProblems(t, "test.toml", ps, []wantProblem{
		{3, `mux.drain_timeout: invalid duration "-1s": must not be negative`},
	})
	_, ps = parseString(t, "[mux]\ndrain_timeout = 30\n[[backend]]\nname = \"b\"\ncommand = \"go\"\n", noEnv)
	checkProblems(t, "test.toml", ps, []wantProblem{
		{2, `mux.drain_timeout: expected a duration in double quotes`},
	})
}
