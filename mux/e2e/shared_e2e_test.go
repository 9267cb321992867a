//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/control"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// sharedDirs gives the test a shared mcp-mux of its own: its own
// rendezvous and control directories, and sessions that ask to share.
func sharedDirs(t *testing.T) {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCP_MUX_CONTROL_DIR", filepath.Join(d, "c"))
	t.Setenv("MCP_MUX_RUN_DIR", filepath.Join(d, "r"))
	t.Setenv("MCP_MUX_SHARED", "1")
	t.Cleanup(func() {
		// Whatever the test left: no shared process of its own outlives it.
		for _, doc := range sharedProcs(t) {
			syscall.Kill(doc.PID, syscall.SIGKILL)
		}
		os.RemoveAll(d)
	})
}

// sharedSession is one agent's mcp-mux session, launched as an agent
// launches it, with a go-sdk client.
type sharedSession struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	cs     *mcp.ClientSession
	stderr *testkit.SyncBuffer
	exited chan struct{} // closed once the process is reaped (cmd.Wait, called once)
}

func startShared(t *testing.T, cfg, dir string, env []string, opts *mcp.ClientOptions, roots ...string) *sharedSession {
	t.Helper()
	return startSharedAt(t, "2025-11-25", cfg, dir, env, opts, roots...)
}

// startSharedAt is startShared with a client of protocol version ("" for
// the current era, as the go-sdk's client probes it).
func startSharedAt(t *testing.T, version, cfg, dir string, env []string, opts *mcp.ClientOptions, roots ...string) *sharedSession {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), "--config", cfg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	s := &sharedSession{cmd: cmd, stdin: stdin, stderr: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.exited) }() // ends with the process, which the cleanup ends
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-s.exited
		}
	})
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts)
	for _, r := range roots {
		c.AddRoots(&mcp.Root{URI: r})
	}
	cs, err := c.Connect(testkit.CtxT(t), &mcp.IOTransport{Reader: stdout, Writer: nopClose{stdin}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, s.stderr)
	}
	s.cs = cs
	return s
}

// end ends the session as an agent does: its stdin closes.
func (s *sharedSession) end(t *testing.T) {
	t.Helper()
	s.stdin.Close()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the session process did not end in 10 s after stdin closed\nstderr:\n%s", s.stderr)
	}
}

func (s *sharedSession) call(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	res, err := s.cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", tool, err, s.stderr)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s: %+v", tool, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// sharedProcs is the shared processes `mcp-mux status` finds.
func sharedProcs(t *testing.T) []*control.Document {
	t.Helper()
	out, _ := exec.Command(testkit.MuxBin(t), "status", "--json").Output()
	var rep struct {
		Processes []*control.Document `json:"processes"`
	}
	json.Unmarshal(out, &rep)
	var docs []*control.Document
	for _, d := range rep.Processes {
		if d.Shared {
			docs = append(docs, d)
		}
	}
	return docs
}

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

func onlyShared(t *testing.T) *control.Document {
	t.Helper()
	docs := sharedProcs(t)
	if len(docs) != 1 {
		t.Fatalf("%d shared processes, want 1: %+v", len(docs), docs)
	}
	return docs[0]
}

func TestTenSessionsAtOnceShareOneProcessAndOneBackend(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	sessions := make([]*sharedSession, 10)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		go func() { defer wg.Done(); sessions[i] = startShared(t, cfg, dir, nil, nil) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, s := range sessions {
		if got := s.call(t, "fx__echo", map[string]any{"n": i}); !strings.Contains(got, fmt.Sprint(i)) {
			t.Errorf("session %d's echo: %q", i, got)
		}
	}
	doc := onlyShared(t)
	var pids []int
	for _, s := range doc.Sessions {
		pids = append(pids, s.PID)
	}
	for _, s := range sessions {
		if !slices.Contains(pids, s.cmd.Process.Pid) {
			t.Errorf("status does not show session process %d: %v", s.cmd.Process.Pid, pids)
		}
	}
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
	for _, tt := range []struct {
		s    *sharedSession
		want string
	}{{a, p1}, {b, p2}, {c, p1}} {
		got := tt.s.call(t, "fx__cwd", nil)
		if r, _ := filepath.EvalSymlinks(tt.want); got != tt.want && got != r {
			t.Errorf("backend runs in %s, want its session's %s", got, tt.want)
		}
	}
	if fx := fixturesUnder(t, onlyShared(t).PID); len(fx) != 2 {
		t.Errorf("%d backends for two projects, want 2", len(fx))
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

func TestADifferentBuildStartsBesideTheOldOne(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	// Another build: the same program, other bytes.
	other := filepath.Join(t.TempDir(), "mcp-mux")
	data, err := os.ReadFile(testkit.MuxBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, append(data, "another build"...), 0o755); err != nil {
		t.Fatal(err)
	}
	old := startShared(t, cfg, dir, nil, nil)
	old.call(t, "fx__echo", nil)
	oldPID := onlyShared(t).PID

	cmd := exec.Command(other, "--config", cfg)
	cmd.Dir, cmd.Env = dir, os.Environ()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = &testkit.SyncBuffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "new", Version: "1"}, nil).Connect(testkit.CtxT(t), &mcp.IOTransport{Reader: stdout, Writer: nopClose{stdin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__echo"}); err != nil {
		t.Fatal(err)
	}
	docs := sharedProcs(t)
	if len(docs) != 2 {
		t.Fatalf("%d shared processes with two builds, want 2", len(docs))
	}
	// The old one ends with its last session; the new one serves on.
	old.end(t)
	testkit.Eventually(t, 10*time.Second, "the old build's process gone", func() bool { return !alive(oldPID) })
	if _, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__echo"}); err != nil {
		t.Fatalf("the new build's session after the old one ended: %v", err)
	}
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
	if why := interopMissing(); why != "" {
		t.Skip(why)
	}
	sharedDirs(t)
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "interop", "node_modules", "@modelcontextprotocol", serverFilesystem.script))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testkit.WriteRawConfig(t, fmt.Sprintf("[[backend]]\nname = \"fs\"\ncommand = \"node\"\nargs = [%q]\n", script))
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
	if n := len(onlyShared(t).Backends); n != 2 {
		t.Errorf("%d server-filesystem instances for two projects (three sessions), want 2", n)
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
