//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// fixtureNames counts the fixture processes under pid by their -name.
func fixtureNames(t *testing.T, pid int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, p := range fixturesUnder(t, pid) {
		argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil {
			continue
		}
		args := bytes.Split(bytes.TrimRight(argv, "\x00"), []byte{0})
		for i := 0; i+1 < len(args); i++ {
			if string(args[i]) == "-name" {
				out[string(args[i+1])]++
			}
		}
	}
	return out
}

// Sessions whose views differ (another profile, another project, another
// token for one backend) each get a Mux of their own in the shared
// process, and still share every backend that runs alike for them: the
// github server per token, the server with a directory of its own once,
// the server that runs in its session's directory once per project.
func TestEachBackendIsSharedByTheSessionsItRunsAlikeFor(t *testing.T) {
	sharedDirs(t)
	fixed := t.TempDir()
	fx := testkit.FixtureBin(t)
	cfg := testkit.WriteRawConfig(t, fmt.Sprintf(`[[backend]]
name = "gh"
command = %[1]q
args = ["-name", "gh", "-env-tool"]
cwd = %[2]q
env = { GITHUB_TOKEN = "${MY_TOKEN}" }

[[backend]]
name = "fixed"
command = %[1]q
args = ["-name", "fixed", "-env-tool"]
cwd = %[2]q

[[backend]]
name = "here"
command = %[1]q
args = ["-name", "here", "-cwd-tool"]

[profile.small]
backends = ["fixed"]
`, fx, fixed))
	p1, p2 := t.TempDir(), t.TempDir()
	a := startShared(t, cfg, p1, []string{"MY_TOKEN=token-a"}, nil)
	b := startShared(t, cfg, p1, []string{"MY_TOKEN=token-b"}, nil)
	c := startShared(t, cfg, p2, []string{"MY_TOKEN=token-a"}, nil)
	small := startSharedArgs(t, "2025-11-25", []string{"--config", cfg, "--profile", "small"}, p1, []string{"MY_TOKEN=token-a"}, nil)
	for _, s := range []*sharedSession{a, b, c} {
		s.call(t, "gh__env", nil)
		s.call(t, "here__cwd", nil)
		s.call(t, "fixed__env", nil)
	}
	small.call(t, "fixed__env", nil)
	if got := b.call(t, "gh__env", nil); !strings.Contains(got, "GITHUB_TOKEN=token-b") || strings.Contains(got, "token-a") {
		t.Errorf("b's github server has %s, want its own token only", got)
	}
	if got := c.call(t, "gh__env", nil); !strings.Contains(got, "GITHUB_TOKEN=token-a") {
		t.Errorf("c's github server has %s, want token-a", got)
	}
	for _, tt := range []struct {
		s    *sharedSession
		want string
	}{{a, p1}, {b, p1}, {c, p2}} {
		got := tt.s.call(t, "here__cwd", nil)
		if r, _ := filepath.EvalSymlinks(tt.want); got != tt.want && got != r {
			t.Errorf("here runs in %s, want its session's %s", got, tt.want)
		}
	}
	doc := onlyShared(t)
	want := map[string]int{"gh": 2, "fixed": 1, "here": 2}
	got := fixtureNames(t, doc.PID)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("backend processes by name %v, want %v (gh one per token, fixed one, here one per project)", got, want)
	}
	// Status shows each process once, with the classes it serves.
	var rows []string
	for _, b := range doc.Backends {
		rows = append(rows, b.Name)
	}
	slices.Sort(rows)
	if want := []string{"fixed [c1 c2 c3 c4]", "gh [c1 c3]", "gh [c2]", "here [c1 c2]", "here [c3]"}; !slices.Equal(rows, want) {
		t.Errorf("status rows %q, want %q", rows, want)
	}
	// One session leaving stops nothing the others use.
	a.end(t)
	for _, s := range []*sharedSession{b, c, small} {
		s.call(t, "fixed__env", nil)
	}
	if got := fixtureNames(t, doc.PID)["fixed"]; got != 1 {
		t.Errorf("after a left, %d fixed servers, want the same 1", got)
	}
}
