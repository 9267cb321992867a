//go:build unix

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// fixturesUnder are the fixture processes below pid.
func fixturesUnder(t *testing.T, pid int) []int {
	t.Helper()
	fx, _ := filepath.EvalSymlinks(testkit.FixtureBin(t))
	var out []int
	for _, p := range descendantsOf(pid) {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); err == nil && exe == fx {
			out = append(out, p)
		}
	}
	return out
}

func TestTenSessionsAtOnceShareOneProcessAndOneBackend(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	sessions, doc := startSharedAtOnce(t, 10, cfg, dir)
	if fx := fixturesUnder(t, doc.PID); len(fx) != 1 {
		t.Errorf("%d fixture processes for 10 sessions, want 1: %v", len(fx), fx)
	}
	// What status shows a user: the shared process, each session's
	// agent, process and the backends it used.
	out, _, _ := runStatus(t)
	for _, want := range []string{fmt.Sprintf("shared mcp-mux pid %d", doc.PID), fmt.Sprintf("e2e 1 (pid %d; uses fx)", sessions[3].cmd.Process.Pid)} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}
	fx := fixturesUnder(t, doc.PID)
	// The last session's end (shared_linger 0) ends everything.
	for _, s := range sessions {
		s.end(t)
	}
	testkit.Eventually(t, 10*time.Second, "the shared process and its backend gone", func() bool {
		return !alive(doc.PID) && (len(fx) == 0 || !alive(fx[0]))
	})
}

func TestSessionsWhoseBackendEnvDiffersDoNotShareIt(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteRawConfig(t, fmt.Sprintf(`[[backend]]
name = "gh"
command = %q
args = ["-name", "gh", "-env-tool"]
env = { GITHUB_TOKEN = "${MY_TOKEN}" }
`, testkit.FixtureBin(t)))
	dir := t.TempDir()
	a := startShared(t, cfg, dir, []string{"MY_TOKEN=token-of-a", "NOISE=1"}, nil)
	b := startShared(t, cfg, dir, []string{"MY_TOKEN=token-of-b", "NOISE=2"}, nil)
	a2 := startShared(t, cfg, dir, []string{"MY_TOKEN=token-of-a", "NOISE=3"}, nil)
	ea, eb, ea2 := a.call(t, "gh__env", nil), b.call(t, "gh__env", nil), a2.call(t, "gh__env", nil)
	if !strings.Contains(ea, "GITHUB_TOKEN=token-of-a") || !strings.Contains(eb, "GITHUB_TOKEN=token-of-b") {
		t.Fatalf("a's backend has %s\nb's has %s", ea, eb)
	}
	if !strings.Contains(ea2, "GITHUB_TOKEN=token-of-a") {
		t.Fatalf("a2's backend has %s", ea2)
	}
	doc := onlyShared(t)
	if fx := fixturesUnder(t, doc.PID); len(fx) != 2 {
		t.Errorf("%d backends for two tokens (a variable the backend does not get differs too), want 2: %v", len(fx), fx)
	}
}

func TestABackendWithNoCwdRunsInItsSessionsDirectory(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx", "-cwd-tool"})
	p1, p2 := t.TempDir(), t.TempDir()
	a := startShared(t, cfg, p1, nil, nil)
	b := startShared(t, cfg, p2, nil, nil)
	c := startShared(t, cfg, p1, nil, nil)
	wantCwd(t, "fx__cwd", map[*sharedSession]string{a: p1, b: p2, c: p1})
	doc := onlyShared(t)
	if fx := fixturesUnder(t, doc.PID); len(fx) != 2 {
		t.Errorf("%d backends for two projects, want 2", len(fx))
	}
	var names []string
	for _, b := range doc.Backends {
		names = append(names, b.Name)
	}
	if !slices.Equal(names, []string{"fx [c1]", "fx [c2]"}) {
		t.Errorf("status names the two instances %q, want each with its class", names)
	}
}

func TestALegacyElicitationReachesTheSessionThatCalled(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"ev", "-name", "ev", "-client-requests"})
	dir := t.TempDir()
	asked := make(chan string, 4)
	client := func(name string) *mcp.ClientOptions {
		return &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- name
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}, nil
		}}
	}
	a := startShared(t, cfg, dir, nil, client("a"))
	b := startShared(t, cfg, dir, nil, client("b"))
	for _, tt := range []struct {
		s    *sharedSession
		name string
	}{{a, "a"}, {b, "b"}, {a, "a"}} {
		got := tt.s.call(t, "ev__elicit", map[string]any{"mode": "form", "message": "who?"})
		if who := <-asked; who != tt.name || !strings.Contains(got, `"`+tt.name+`"`) {
			t.Errorf("session %s's call asked session %s, got %s", tt.name, who, got)
		}
	}
	if fx := fixturesUnder(t, onlyShared(t).PID); len(fx) != 1 {
		t.Errorf("%d backends, want 1 shared", len(fx))
	}
}

func TestAKilledSharedProcessFailsWhatWasInFlightAndTheSessionGoesOn(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	s := startShared(t, cfg, t.TempDir(), nil, nil)
	s.call(t, "fx__echo", map[string]any{"x": 1})
	doc := onlyShared(t)
	oldFx := fixturesUnder(t, doc.PID)
	arrived := testkit.Arrived(func() int { return testkit.Requests(s.call(t, "fx__stats", nil)) })
	errc := make(chan error, 1)
	go func() {
		_, err := s.cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__sleep", Arguments: map[string]any{"ms": 30000}})
		errc <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the sleep in flight", arrived)
	syscall.Kill(doc.PID, syscall.SIGKILL)
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "ended while this request was in flight") {
			t.Fatalf("the call in flight ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight was not answered 10 s after kill -9")
	}
	if got := s.call(t, "fx__echo", map[string]any{"after": "kill"}); !strings.Contains(got, "kill") {
		t.Fatalf("after kill -9: %q", got)
	}
	next := onlyShared(t)
	if next.PID == doc.PID {
		t.Fatal("the same shared process after kill -9")
	}
	testkit.Eventually(t, 10*time.Second, "the killed process's backends gone", func() bool {
		for _, p := range oldFx {
			if alive(p) {
				return false
			}
		}
		return true
	})
}

func TestTheSharedProcessLingersAfterItsLastSession(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, `shared_linger = "1500ms"`, []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	s := startShared(t, cfg, dir, nil, nil)
	s.call(t, "fx__echo", nil)
	doc := onlyShared(t)
	fx := fixturesUnder(t, doc.PID)
	ended := time.Now()
	s.end(t)
	// Within the linger a new session meets it, and its backend.
	s2 := startShared(t, cfg, dir, nil, nil)
	s2.call(t, "fx__echo", nil)
	if d := onlyShared(t); d.PID != doc.PID || time.Since(ended) > 1500*time.Millisecond {
		t.Logf("the second session came %s after the first ended", time.Since(ended))
	} else if got := fixturesUnder(t, d.PID); !slices.Equal(got, fx) {
		t.Errorf("the backend was restarted within the linger: %v, then %v", fx, got)
	}
	s2.end(t)
	last := time.Now()
	testkit.Eventually(t, 10*time.Second, "the shared process gone after its linger", func() bool { return !alive(doc.PID) })
	if d := time.Since(last); d < time.Second {
		t.Errorf("the shared process ended %s after its last session, want about 1.5 s", d)
	}
	testkit.Eventually(t, 5*time.Second, "its backend gone with it", func() bool {
		for _, p := range fx {
			if alive(p) {
				return false
			}
		}
		return true
	})
}

// TestServerFilesystemGetsEachProjectsRootsAndNeverAnothers: the npm
// server-filesystem started with no directory takes its client's roots.
// Sessions in one project share its instance; a session in another
// project gets its own, which allows that project alone.
func TestServerFilesystemGetsEachProjectsRootsAndNeverAnothers(t *testing.T) {
	// With no cwd it runs in its session's directory, so each project has
	// its own; with a cwd of its own it runs alike for every project, and
	// its agents' roots alone decide.
	t.Run("no cwd", func(t *testing.T) { serverFilesystemPerProject(t, "") })
	t.Run("a cwd of its own", func(t *testing.T) { serverFilesystemPerProject(t, t.TempDir()) })
}

func serverFilesystemPerProject(t *testing.T, cwd string) {
	cfg := sharedFilesystemConfig(t, cwd)
	var projects []string
	for range 2 {
		d, _ := filepath.EvalSymlinks(t.TempDir())
		os.WriteFile(filepath.Join(d, "secret.txt"), []byte("of "+filepath.Base(d)), 0o600)
		projects = append(projects, d)
	}
	root := func(d string) string { return "file://" + d }
	a := startShared(t, cfg, projects[0], nil, nil, root(projects[0]))
	b := startShared(t, cfg, projects[1], nil, nil, root(projects[1]))
	a2 := startShared(t, cfg, projects[0], nil, nil, root(projects[0]))
	for _, tt := range []struct {
		name        string
		s           *sharedSession
		own, theirs string
	}{{"a", a, projects[0], projects[1]}, {"b", b, projects[1], projects[0]}, {"a2", a2, projects[0], projects[1]}} {
		var dirs string
		testkit.Eventually(t, 15*time.Second, tt.name+"'s roots allowed", func() bool {
			dirs = tt.s.call(t, "fs__list_allowed_directories", map[string]any{})
			return strings.Contains(dirs, tt.own)
		})
		if strings.Contains(dirs, tt.theirs) {
			t.Errorf("session %s's server-filesystem allows the other project: %s", tt.name, dirs)
		}
		res, err := tt.s.cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fs__read_text_file", Arguments: map[string]any{"path": filepath.Join(tt.theirs, "secret.txt")}})
		if err == nil && !res.IsError {
			t.Errorf("session %s read the other project's file: %+v", tt.name, res.Content)
		}
	}
	doc := onlyShared(t)
	pids := map[int]bool{}
	for _, b := range doc.Backends {
		pids[b.PID] = true
	}
	if len(pids) != 2 {
		t.Errorf("%d server-filesystem processes for two projects (three sessions), want 2: %+v", len(pids), doc.Backends)
	}
}

// TestWhereTheSharedProcessCannotBeMetTheSessionServesItselfWithOneWarning:
// a rendezvous directory that cannot be made; [mux] shared = false; and
// MCP_MUX_SHARED=0 each serve in the session's own process, as before.
func TestWhereTheSharedProcessCannotBeMetTheSessionServesItselfWithOneWarning(t *testing.T) {
	sharedDirs(t)
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o600)
	for _, tt := range []struct {
		name, extra string
		env         []string
		warns       int
	}{
		{"unusable directory", "", []string{"MCP_MUX_RUN_DIR=" + filepath.Join(file, "run")}, 1},
		{"shared = false", "shared = false", []string{"MCP_MUX_SHARED="}, 0},
		{"MCP_MUX_SHARED=0", "", []string{"MCP_MUX_SHARED=0"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testkit.WriteConfig(t, tt.extra, []string{"fx", "-name", "fx"})
			s := startShared(t, cfg, t.TempDir(), tt.env, nil)
			s.call(t, "fx__echo", nil)
			if fx := fixturesUnder(t, s.cmd.Process.Pid); len(fx) != 1 {
				t.Errorf("%d backends under the session's own process, want 1", len(fx))
			}
			if n := strings.Count(s.stderr.String(), "serving in this process"); n != tt.warns {
				t.Errorf("%d warnings, want %d:\n%s", n, tt.warns, s.stderr)
			}
			if docs := sharedProcs(t); len(docs) != 0 {
				t.Errorf("a shared process runs: %+v", docs)
			}
		})
	}
}

// TestAKilledSessionEndsItsShareAndTheLastOneEverything: kill -9 of an
// agent's session process ends its session in the shared process; when
// it was the last, the backends and the shared process end too.
func TestAKilledSessionEndsItsShareAndTheLastOneEverything(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	a := startShared(t, cfg, dir, nil, nil)
	b := startShared(t, cfg, dir, nil, nil)
	a.call(t, "fx__echo", nil)
	doc := onlyShared(t)
	fx := fixturesUnder(t, doc.PID)
	a.cmd.Process.Kill()
	testkit.Eventually(t, 10*time.Second, "one session left", func() bool {
		d := sharedProcs(t)
		return len(d) == 1 && len(d[0].Sessions) == 1
	})
	b.call(t, "fx__echo", nil)
	if got := fixturesUnder(t, doc.PID); !slices.Equal(got, fx) {
		t.Errorf("the backend changed when another session was killed: %v, then %v", fx, got)
	}
	// SIGTERM, as agents end their servers: the session ends at once.
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(3 * time.Second):
		t.Fatal("the session process did not end on SIGTERM")
	}
	testkit.Eventually(t, 10*time.Second, "the shared process and its backend gone", func() bool {
		return !alive(doc.PID) && !alive(fx[0])
	})
}

// TestASharedSessionThatStopsReadingCostsTheOthersNothing: one agent stops
// reading while its backend floods it with updates. The shared process's
// memory stays bounded, another session of the same backend is served
// meanwhile, and the stalled agent learns of every URI once it reads.
func TestASharedSessionThatStopsReadingCostsTheOthersNothing(t *testing.T) {
	sharedDirs(t)
	cfg := floodConfig(t)
	wd, _ := os.Getwd()
	other := startShared(t, cfg, wd, nil, nil)
	w := startWire(t, cfg)
	w.stall(40_000)
	began := time.Now()
	logs, _ := filepath.Glob(filepath.Join(os.Getenv("MCP_MUX_RUN_DIR"), "*.log"))
	if len(logs) != 1 {
		t.Fatalf("shared logs: %v", logs)
	}
	for i := 0; ; i++ {
		start := time.Now()
		other.call(t, "notes__echo", map[string]any{"i": i})
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("another session's call took %s during the flood", d)
		}
		data, _ := os.ReadFile(logs[0])
		if strings.Count(string(data), "sent 40000 updates for fixture://notes/res/") == 3 {
			t.Logf("another session made %d calls during the flood", i+1)
			break
		}
		if time.Since(began) > 60*time.Second {
			t.Fatal("the backend did not send its flood in 60 s")
		}
	}
	doc := onlyShared(t)
	for _, p := range []struct {
		what string
		pid  int
	}{{"the shared process", doc.PID}, {"the stalled session's process", w.cmd.Process.Pid}} {
		peak := peakRSS(t, p.pid)
		t.Logf("peak RSS of %s after a flood of 3 × 40,000 updates to a stalled agent: %.1f MB", p.what, float64(peak)/1e6)
		if peak > 100<<20 {
			t.Errorf("peak RSS of %s %d MB, want under 100 MB", p.what, peak>>20)
		}
	}
	w.readStalled(t)
	w.stdin.Close()
	<-w.exited
}

// TestSessionsOfOneProjectWithOtherRootsNeverGetEachOthers: two sessions
// started in one directory whose agents give other roots share the
// backend; it is given the roots both have, never one's alone, and the
// roots of each once it is alone again.
func TestSessionsOfOneProjectWithOtherRootsNeverGetEachOthers(t *testing.T) {
	cfg := sharedFilesystemConfig(t, "")
	project, _ := filepath.EvalSymlinks(t.TempDir())
	ra, rb, both := filepath.Join(project, "alpha"), filepath.Join(project, "beta"), filepath.Join(project, "common")
	for _, d := range []string{ra, rb, both} {
		os.Mkdir(d, 0o755)
	}
	a := startShared(t, cfg, project, nil, nil, "file://"+ra, "file://"+both)
	allowed := func(s *sharedSession) string { return s.call(t, "fs__list_allowed_directories", map[string]any{}) }
	testkit.Eventually(t, 15*time.Second, "a's roots allowed", func() bool { return strings.Contains(allowed(a), ra) })
	b := startShared(t, cfg, project, nil, nil, "file://"+rb, "file://"+both)
	var da, db string
	testkit.Eventually(t, 15*time.Second, "the roots both sessions have, and only those", func() bool {
		da, db = allowed(a), allowed(b)
		return !strings.Contains(da, ra) && !strings.Contains(db, ra) && strings.Contains(db, both)
	})
	for _, d := range []string{da, db} {
		if strings.Contains(d, ra) || strings.Contains(d, rb) {
			t.Errorf("one session's own root allowed to both: %s", d)
		}
	}
	if n := len(onlyShared(t).Backends); n != 1 {
		t.Errorf("%d instances, want 1 shared", n)
	}
	// Alone again, b gets its own roots back.
	a.end(t)
	testkit.Eventually(t, 15*time.Second, "b's own roots once a left", func() bool { return strings.Contains(allowed(b), rb) })
}

// TestASessionThatComesAsTheSharedProcessEndsMeetsTheNext: with no
// linger the shared process ends with its last session; a session that
// comes in that moment meets the next one, never its own process.
func TestASessionThatComesAsTheSharedProcessEndsMeetsTheNext(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	prev := startShared(t, cfg, dir, nil, nil)
	prev.call(t, "fx__echo", nil)
	for i := range 5 {
		go prev.stdin.Close() // the last session leaves as the next comes
		next := startShared(t, cfg, dir, nil, nil)
		next.call(t, "fx__echo", map[string]any{"i": i})
		if strings.Contains(next.stderr.String(), "serving in this process") {
			t.Fatalf("round %d: the session served itself:\n%s", i, next.stderr)
		}
		prev = next
	}
}

// TestACurrentEraSessionEndsAtOnceWithItsListenStreamOpen: an agent of
// the current era (Claude Code 2.1.328 is one) holds a
// subscriptions/listen open for as long as it runs, which is never
// answered. When its stdin ends, its session ends at once, and with it
// the shared process (shared_linger 0) or the session's own mcp-mux: not
// a request_timeout later.
func TestACurrentEraSessionEndsAtOnceWithItsListenStreamOpen(t *testing.T) {
	for _, shared := range []string{"1", "0"} {
		t.Run("MCP_MUX_SHARED="+shared, func(t *testing.T) {
			sharedDirs(t)
			t.Setenv("MCP_MUX_SHARED", shared)
			cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
			listen := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}}
			s := startSharedAt(t, "", cfg, t.TempDir(), nil, listen)
			if v := s.cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
				t.Fatalf("the client speaks %s, want the current era", v)
			}
			s.call(t, "fx__echo", nil)
			pid := s.cmd.Process.Pid
			if shared == "1" {
				pid = onlyShared(t).PID
			}
			fx := fixturesUnder(t, pid)
			ended := time.Now()
			s.end(t)
			testkit.Eventually(t, 5*time.Second, "mcp-mux and its backend gone", func() bool {
				return !alive(pid) && !slices.ContainsFunc(fx, alive)
			})
			t.Logf("all gone %d ms after stdin closed", time.Since(ended).Milliseconds())
		})
	}
}

// TestAnAgentGoneMidCallEndsItsShareAtOnce: an agent's session process
// killed while its call runs: nobody will read the answer, so the shared
// process does not wait for it (request_timeout) before it ends and stops
// the backend.
func TestAnAgentGoneMidCallEndsItsShareAtOnce(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, `request_timeout = "60s"`, []string{"fx", "-name", "fx"})
	s := startShared(t, cfg, t.TempDir(), nil, nil)
	arrived := testkit.Arrived(func() int { return testkit.Requests(s.call(t, "fx__stats", nil)) })
	go s.cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__sleep", Arguments: map[string]any{"ms": 50000}})
	testkit.Eventually(t, 10*time.Second, "the sleep in flight", arrived)
	doc := onlyShared(t)
	fx := fixturesUnder(t, doc.PID)
	killed := time.Now()
	s.cmd.Process.Kill()
	testkit.Eventually(t, 10*time.Second, "the shared process and its backend gone", func() bool {
		return !alive(doc.PID) && !alive(fx[0])
	})
	t.Logf("all gone %d ms after the session process was killed", time.Since(killed).Milliseconds())
}

// TestAnAgentThatEndsItsStdinStillGetsTheAnswersInFlight: an agent that
// closes stdin and reads on gets the answers to what it asked, through
// the shared process as in-process.
func TestAnAgentThatEndsItsStdinStillGetsTheAnswersInFlight(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	w := startWire(t, cfg)
	w.initialize()
	w.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"fx__sleep","arguments":{"ms":300}}}`)
	w.stdin.Close()
	for {
		m, ok := w.next()
		if !ok {
			t.Fatalf("stdout ended before the answer\nstderr:\n%s", w.stderr)
		}
		if string(m.ID) == `"slow"` {
			if m.Error != nil {
				t.Fatalf("the call in flight got %+v", m.Error)
			}
			break
		}
	}
	<-w.exited
}

// sharedFilesystemConfig is a config of the npm server-filesystem with no
// directory (it takes its client's roots), for a test of the shared
// process; it skips the test where the npm servers are not installed.
func sharedFilesystemConfig(t *testing.T, cwd string) string {
	t.Helper()
	if why := interopMissing(); why != "" {
		t.Skip(why)
	}
	sharedDirs(t)
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "interop", "node_modules", "@modelcontextprotocol", serverFilesystem.script))
	if err != nil {
		t.Fatal(err)
	}
	entry := fmt.Sprintf("[[backend]]\nname = \"fs\"\ncommand = \"node\"\nargs = [%q]\n", script)
	if cwd != "" {
		entry += fmt.Sprintf("cwd = %q\n", cwd)
	}
	cfg := testkit.WriteRawConfig(t, entry)
	return cfg
}
