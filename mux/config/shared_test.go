package config

import (
	"strings"
	"testing"
	"time"
)

// The sharing knobs of the shared mcp-mux: absent, [mux] shared is "not
// set" (the default, true), shared_linger 0 and each backend's share auto.
func TestSharingKnobsDefaults(t *testing.T) {
	cfg, ps := parseString(t, "[[backend]]\nname = \"b\"\ncommand = \"go\"\n", noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	if cfg.Mux.Shared != nil || !cfg.Mux.SharedOn() {
		t.Errorf("shared absent: Shared = %v, SharedOn = %v; want nil, true", cfg.Mux.Shared, cfg.Mux.SharedOn())
	}
	if cfg.Mux.SharedLinger.Duration != 0 {
		t.Errorf("shared_linger absent: %s, want 0", cfg.Mux.SharedLinger)
	}
	if got := cfg.Backends[0].Share; got != ShareAuto {
		t.Errorf("share absent: %q, want %q", got, ShareAuto)
	}
}

func TestSharingKnobsAreDecoded(t *testing.T) {
	cfg, ps := parseString(t, `[mux]
shared = false
shared_linger = "10m"

[[backend]]
name = "a"
command = "go"
share = "always"

[[backend]]
name = "b"
command = "go"
share = "never"
`, noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	if cfg.Mux.Shared == nil || *cfg.Mux.Shared || cfg.Mux.SharedOn() {
		t.Errorf("shared = false: Shared = %v", cfg.Mux.Shared)
	}
	if cfg.Mux.SharedLinger.Duration != 10*time.Minute {
		t.Errorf("shared_linger = %s, want 10m", cfg.Mux.SharedLinger)
	}
	if cfg.Backends[0].Share != ShareAlways || cfg.Backends[1].Share != ShareNever {
		t.Errorf("share = %q, %q; want always, never", cfg.Backends[0].Share, cfg.Backends[1].Share)
	}
	cfg, ps = parseString(t, "[mux]\nshared = true\n[[backend]]\nname = \"b\"\ncommand = \"go\"\n", noEnv)
	if ps != nil || cfg.Mux.Shared == nil || !*cfg.Mux.Shared {
		t.Errorf("shared = true: Shared = %v, problems:%s", cfg.Mux.Shared, problemStrings(ps))
	}
}

func TestSharingKnobsMistakesNameTheLine(t *testing.T) {
	_, ps := parseString(t, `[mux]
shared = "yes"
shared_linger = "-1m"

[[backend]]
name = "a"
command = "go"
share = "alway"

[[backend]]
name = "b"
command = "go"
share = "sometimes"
`, noEnv)
	checkProblems(t, "test.toml", ps, []wantProblem{
		{2, `mux.shared: expected true or false, got a string`},
		{3, `mux.shared_linger: invalid duration "-1m": must not be negative`},
		{8, `backend #1 (a).share: must be "auto" (shared between the sessions for which its command, args, cwd and env are the same; the default), "always" (one for every session) or "never" (one per session) (got "alway"); did you mean "always"?`},
		{13, `backend #2 (b).share: must be "auto" (`},
	})
}

// Serving, a share mistake breaks its backend only, as other per-backend
// mistakes do.
func TestShareMistakeBreaksItsBackendOnly(t *testing.T) {
	cfg, err := ParseForServing("serve.toml", []byte(`[[backend]]
name = "a"
command = "go"
share = "sometimes"

[[backend]]
name = "b"
command = "go"
share = "never"
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if want := `serve.toml:4: backend #1 (a).share: must be "auto"`; !strings.Contains(cfg.Backends[0].Broken, want) {
		t.Errorf("a: Broken = %q, want %q", cfg.Backends[0].Broken, want)
	}
	if cfg.Backends[1].Broken != "" || cfg.Backends[1].Share != ShareNever {
		t.Errorf("b: Broken = %q, Share = %q; want it untouched", cfg.Backends[1].Broken, cfg.Backends[1].Share)
	}
}

// With [mux] shared = false each launch runs its own backends: a
// shared_linger or a backend's share would change nothing, and check says
// so rather than let the user believe they do.
func TestSharingKnobsWithoutSharingAreWarnings(t *testing.T) {
	cfg, ps := parseString(t, `[mux]
shared = false
shared_linger = "5m"

[[backend]]
name = "a"
command = "go"
share = "never"

[[backend]]
name = "b"
command = "go"
`, noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	checkProblems(t, "test.toml", cfg.Warnings, []wantProblem{
		{3, `mux.shared_linger: has no effect with shared = false (each launch runs its own mcp-mux)`},
		{8, `backend #1 (a).share: has no effect with [mux] shared = false (each launch runs its own mcp-mux)`},
	})
	cfg, _ = parseString(t, "[mux]\nshared_linger = \"5m\"\n[[backend]]\nname = \"a\"\ncommand = \"go\"\nshare = \"never\"\n", noEnv)
	if len(cfg.Warnings) != 0 {
		t.Errorf("shared by default, yet warnings:%s", problemStrings(cfg.Warnings))
	}
}
