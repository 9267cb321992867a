//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	wantCwd(t, "here__cwd", map[*sharedSession]string{a: p1, b: p1, c: p2})
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

// Two views of one backend (sessions of two profiles): kill -9 of the
// backend restarts one process for both, each gets its subscription back,
// and an elicitation of the restarted backend reaches the session whose
// call it serves.
func TestASharedBackendKilledComesBackOnceForEveryView(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteRawConfig(t, fmt.Sprintf(`[[backend]]
name = "fx"
command = %q
args = ["-name", "fx", "-client-requests"]

[profile.other]
backends = ["fx"]
`, testkit.FixtureBin(t)))
	dir := t.TempDir()
	asked := make(chan string, 4)
	client := func(name string) *mcp.ClientOptions {
		return &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked <- name
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}, nil
			},
			ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
				asked <- name + " updated " + r.Params.URI
			},
		}
	}
	a := startShared(t, cfg, dir, nil, client("a"))
	b := startSharedArgs(t, "2025-11-25", []string{"--config", cfg, "--profile", "other"}, dir, nil, client("b"))
	uri := "fixture://fx/res/1"
	for _, s := range []*sharedSession{a, b} {
		if err := s.cs.Subscribe(testkit.CtxT(t), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	doc := onlyShared(t)
	before := fixtureNames(t, doc.PID)["fx"]
	old := fixturesUnder(t, doc.PID)
	if before != 1 {
		t.Fatalf("%d fx processes for two views, want 1", before)
	}
	killProcess(old[0])
	testkit.Eventually(t, 15*time.Second, "one new fx process for both views", func() bool {
		now := fixturesUnder(t, doc.PID)
		return len(now) == 1 && now[0] != old[0]
	})
	for _, s := range []*sharedSession{a, b} {
		testkit.Eventually(t, 15*time.Second, "the session's calls go through again", func() bool {
			res, err := s.cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"x": 1}})
			return err == nil && !res.IsError
		})
	}
	// Once restored, an update reaches both subscribers.
	for len(asked) > 0 {
		<-asked
	}
	a.call(t, "fx__update", map[string]any{"uri": uri})
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case m := <-asked:
			got[m] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("after the restart the update reached only %v", got)
		}
	}
	for _, tt := range []struct {
		s    *sharedSession
		name string
	}{{b, "b"}, {a, "a"}} {
		out := tt.s.call(t, "fx__elicit", map[string]any{"mode": "form", "message": "who?"})
		if who := <-asked; who != tt.name || !strings.Contains(out, `"`+tt.name+`"`) {
			t.Errorf("session %s's call asked session %s, got %s", tt.name, who, out)
		}
	}
	if n := len(fixturesUnder(t, doc.PID)); n != 1 {
		t.Errorf("%d fx processes at the end, want 1", n)
	}
}

// share = "always" runs one instance for every session, in the first
// session's environment; "never" one for each session; "auto" one for
// those it runs alike for.
func TestTheShareKnobDecidesPerBackend(t *testing.T) {
	sharedDirs(t)
	fx := testkit.FixtureBin(t)
	cfg := testkit.WriteRawConfig(t, fmt.Sprintf(`[[backend]]
name = "always"
command = %[1]q
args = ["-name", "always", "-env-tool"]
env = { GITHUB_TOKEN = "${MY_TOKEN}" }
share = "always"

[[backend]]
name = "never"
command = %[1]q
args = ["-name", "never"]
share = "never"

[[backend]]
name = "auto"
command = %[1]q
args = ["-name", "auto", "-env-tool"]
env = { GITHUB_TOKEN = "${MY_TOKEN}" }
`, fx))
	dir := t.TempDir()
	var sessions []*sharedSession
	for _, tok := range []string{"token-a", "token-b", "token-a"} {
		s := startShared(t, cfg, dir, []string{"MY_TOKEN=" + tok}, nil)
		s.call(t, "always__env", nil)
		s.call(t, "never__echo", nil)
		s.call(t, "auto__env", nil)
		sessions = append(sessions, s)
	}
	if got := sessions[1].call(t, "always__env", nil); !strings.Contains(got, "GITHUB_TOKEN=token-a") {
		t.Errorf("b's share = \"always\" backend has %s, want the first session's token", got)
	}
	if got := sessions[1].call(t, "auto__env", nil); !strings.Contains(got, "GITHUB_TOKEN=token-b") {
		t.Errorf("b's share = \"auto\" backend has %s, want its own token", got)
	}
	want := map[string]int{"always": 1, "never": 3, "auto": 2}
	if got := fixtureNames(t, onlyShared(t).PID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("backend processes by name %v, want %v", got, want)
	}
}

// metrics_listen of the shared process: one endpoint for every view, each
// series labelled with its view, in one valid exposition.
func TestTheSharedProcessServesMetricsListenForEveryView(t *testing.T) {
	sharedDirs(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg := testkit.WriteRawConfig(t, fmt.Sprintf(`[mux]
metrics_listen = %q

[[backend]]
name = "f"
command = %q
args = ["-name", "f"]

[profile.other]
backends = ["f"]
`, addr, testkit.FixtureBin(t)))
	dir := t.TempDir()
	a := startShared(t, cfg, dir, nil, nil)
	b := startSharedArgs(t, "2025-11-25", []string{"--config", cfg, "--profile", "other"}, dir, nil, nil)
	a.call(t, "f__echo", nil)
	a.call(t, "f__echo", nil)
	b.call(t, "f__echo", nil)
	code, fams := getMetrics(t, "http://"+addr+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics of the shared process: %d", code)
	}
	calls := map[string]float64{}
	for _, m := range fams["mcp_mux_requests_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["backend"] == "f" && l["method"] == "tools/call" && l["outcome"] == "ok" {
			calls[l["class"]] += m.GetCounter().GetValue()
		}
	}
	if calls["c1"] != 2 || calls["c2"] != 1 {
		t.Errorf("f's calls by view %v, want c1: 2, c2: 1", calls)
	}
}
