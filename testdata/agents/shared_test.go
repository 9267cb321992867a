package agents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/mux/control"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// twoCalls is the fake model's script of one session: call the fixture's
// echo, then server-everything's, then, with both results in, say so on
// reached and end the turn only once hold is closed, so that the test
// sees every session at that point at once.
type twoCalls struct {
	message string // the echoes' argument, the session's own
	reached chan<- struct{}
	hold    <-chan struct{}

	mu      sync.Mutex
	steps   []string
	results []string  // what the model was shown of the two calls
	at      time.Time // when both results were in
}

// The tools, whatever the agent prefixed them with (mcp__fx__echo
// directly, mcp__mcp-mux__fx__echo through mcp-mux).
var twoTools = []string{"__fx__echo", "__server-everything__echo"}

// did is what the model did, in order.
func (s *twoCalls) did() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.steps...)
}

// shown is what the model was shown of the two calls.
func (s *twoCalls) shown() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.results
}

func (s *twoCalls) script(turn int, reqs []*testkit.ModelRequest) testkit.ModelReply {
	req := reqs[turn]
	s.mu.Lock()
	if turn < len(twoTools) {
		defer s.mu.Unlock()
		tl, ok := find(req.Tools, func(tl testkit.ModelTool) bool { return strings.HasSuffix(tl.Name, twoTools[turn]) })
		if !ok {
			s.steps = append(s.steps, "no tool *"+twoTools[turn])
			return testkit.ModelReply{Text: endText}
		}
		s.steps = append(s.steps, "call "+tl.Name)
		return testkit.ModelReply{Call: &testkit.ModelCall{Name: tl.Name, Args: map[string]any{"message": s.message}}}
	}
	first := s.at.IsZero()
	if first {
		s.results = append([]string(nil), req.Results...)
		s.at = time.Now()
	}
	s.steps = append(s.steps, "end")
	s.mu.Unlock()
	if first && s.reached != nil {
		s.reached <- struct{}{}
	}
	<-s.hold
	return testkit.ModelReply{Text: endText}
}

// session is one Claude Code run of TestThreeClaudeCodeSessionsShareOneMcpMux.
type session struct {
	plan    *twoCalls
	model   *testkit.FakeModel
	cmd     *exec.Cmd
	out     testkit.SyncBuffer
	started time.Time
	exited  time.Time
	err     error
	done    chan struct{}
}

// prepareClaude is one `claude -p` in work, srvs its servers in home's
// config, its model answering as plan says; start starts it. The config
// files are the same for every session of one home: they are all written
// before any starts.
func prepareClaude(t *testing.T, ctx context.Context, dir, home, work, tmp string, srvs []server, plan *twoCalls) *session {
	t.Helper()
	bin := needModule(t, "agents", ".bin/"+claude.bin)
	s := &session{plan: plan, model: claude.model(t, plan.script), done: make(chan struct{})}
	args, env, err := claude.setup(home, work, s.model.URL, srvs, "Echo your message with the fx echo tool, then with server-everything's, then say done.")
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = agentCommand(ctx, bin, dir, home, work, tmp, args, env)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	return s
}

func (s *session) start(t *testing.T) {
	t.Helper()
	s.started = time.Now()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		s.exited = time.Now()
		close(s.done)
	}()
}

// trio is three Claude Code sessions started at once in one project and
// HOME (one user's three terminals), each held by its model once it has
// both results in, until release.
type trio struct {
	sessions []*session
	release  func()
	released time.Time
	logs     string // a glob of the logs to show on failure
}

// startTrio starts three sessions in dir with srvs and returns once each
// has both results in.
func startTrio(t *testing.T, ctx context.Context, dir string, srvs []server, logs string) *trio {
	t.Helper()
	home, work, tmp := runDirs(t, dir)
	hold := make(chan struct{})
	// However the test ends, the models' handlers return.
	tr := &trio{release: sync.OnceFunc(func() { close(hold) }), logs: logs}
	t.Cleanup(tr.release)
	reached := make(chan struct{}, 3)
	for i := range 3 {
		tr.sessions = append(tr.sessions, prepareClaude(t, ctx, dir, home, work, tmp, srvs,
			&twoCalls{message: fmt.Sprintf("session-%d", i+1), reached: reached, hold: hold}))
	}
	for _, s := range tr.sessions {
		s.start(t)
	}
	exited := anyDone(tr.sessions)
	for n := range 3 {
		select {
		case <-reached:
		case <-ctx.Done():
			tr.fail(t, "%d of the 3 sessions had both results in before the deadline", n)
		case <-exited:
			tr.fail(t, "a session exited before its two calls were done")
		}
	}
	return tr
}

// seen is what the user would look at: each session's output, the
// shared process's log.
func (tr *trio) seen() string {
	var sb strings.Builder
	for i, s := range tr.sessions {
		fmt.Fprintf(&sb, "\n--- session %d (steps %v):\n%s", i+1, s.plan.did(), tail(s.out.String(), 2000))
	}
	logs, _ := filepath.Glob(tr.logs)
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		fmt.Fprintf(&sb, "\n--- %s:\n%s", l, tail(string(b), 4000))
	}
	return sb.String()
}

func (tr *trio) fail(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatalf(format+"%s", append(args, tr.seen())...)
}

func (tr *trio) pids() []int {
	var pids []int
	for _, s := range tr.sessions {
		pids = append(pids, s.cmd.Process.Pid)
	}
	return pids
}

// end lets the three end their turn and waits for them to exit; it
// returns when the last did.
func (tr *trio) end(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	tr.released = time.Now()
	tr.release()
	var last time.Time
	for i, s := range tr.sessions {
		select {
		case <-s.done:
		case <-ctx.Done():
			tr.fail(t, "session %d did not exit", i+1)
		}
		if s.err != nil {
			t.Errorf("session %d: claude exited with %v; output:\n%s", i+1, s.err, tail(s.out.String(), 2000))
		}
		if s.exited.After(last) {
			last = s.exited
		}
	}
	return last
}

// runDirs are the HOME, working directory and TMPDIR of the runs in dir.
func runDirs(t *testing.T, dir string) (home, work, tmp string) {
	t.Helper()
	home, work, tmp = filepath.Join(dir, "home"), filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
	for _, d := range []string{home, work, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return home, work, tmp
}

// TestThreeClaudeCodeSessionsShareOneMcpMux: three Claude Code sessions
// started at once in one project, with mcp-mux (shared) as their one
// server, each call a tool of each of its two backends. Their models are
// shown what they are shown with the two servers registered directly;
// meanwhile one shared mcp-mux runs one instance of each server for the
// three (directly, each session runs its own); after the sessions end,
// nothing of it is left.
func TestThreeClaudeCodeSessionsShareOneMcpMux(t *testing.T) {
	needModule(t, "agents", ".bin/"+claude.bin)
	base := t.TempDir()
	// Short paths: the rendezvous socket's must fit in sun_path.
	short, err := os.MkdirTemp("/tmp", "ccsh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	t.Setenv("MCP_MUX_SHARED", "1")
	t.Setenv("MCP_MUX_RUN_DIR", filepath.Join(short, "r"))
	t.Setenv("MCP_MUX_CONTROL_DIR", filepath.Join(short, "c"))

	fixture := testkit.FixtureBin(t)
	twoServers := func(dir string) []server {
		for _, s := range servers(t, dir) {
			if s.name == "server-everything" {
				return []server{{name: "fx", command: fixture, args: []string{"-name", "fx"}, env: map[string]string{markerEnv: dir}}, s}
			}
		}
		t.Fatal("the suite has no server-everything")
		return nil
	}
	everything := twoServers(base)[1].args[0]
	isServer := func(cmdline []string) string {
		switch {
		case len(cmdline) > 0 && cmdline[0] == fixture:
			return "fx"
		case slices.Contains(cmdline, everything):
			return "server-everything"
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*runTimeout)
	defer cancel()

	// Directly: each session starts the two servers itself.
	directDir := filepath.Join(base, "direct")
	defer killAll(directDir)
	direct := startTrio(t, ctx, directDir, twoServers(directDir), "")
	directUse := footprint(procTable(), direct.pids(), func(cl []string) bool { return isServer(cl) != "" })
	direct.end(t, ctx)
	for i, s := range direct.sessions {
		if len(s.plan.shown()) != 2 {
			t.Fatalf("direct session %d: the model was shown %d tool results, want 2 (steps %v, %v); output:\n%s", i+1, len(s.plan.shown()), s.plan.did(), s.err, tail(s.out.String(), 3000))
		}
	}

	// Through the shared mcp-mux.
	sharedDir := filepath.Join(base, "shared")
	defer killAll(sharedDir)
	muxSrv := muxServer(t, sharedDir, filepath.Join(sharedDir, "catalogs"), twoServers(sharedDir))
	shared := startTrio(t, ctx, sharedDir, []server{muxSrv}, filepath.Join(short, "r", "*.log"))

	// All three are held with both results in: one shared process, one
	// instance of each server, three sessions of claude-code.
	doc := sharedDoc(t, muxSrv)
	if doc == nil {
		shared.fail(t, "mcp-mux status --json shows no shared process while three sessions use it")
	}
	claudes := shared.pids()
	procs := procTable()
	// Each session is the mcp-mux one claude process launched.
	var parents []int
	for _, ss := range doc.Sessions {
		parents = append(parents, procs.parent[ss.PID])
		if name, _, _ := strings.Cut(ss.Client, " "); name != "claude-code" {
			t.Errorf("status shows session %s of client %q, want claude-code", ss.ID, ss.Client)
		}
	}
	slices.Sort(parents)
	if !slices.Equal(parents, slices.Sorted(slices.Values(claudes))) {
		t.Errorf("status shows %d sessions of the shared mcp-mux, of processes whose parents are %v, want one of each claude process %v: %+v", len(doc.Sessions), parents, claudes, doc.Sessions)
	}
	cfgPath := muxSrv.args[1]
	if got := procs.matching(func(cmdline []string) bool {
		return slices.Contains(cmdline, "__shared") && slices.Contains(cmdline, cfgPath)
	}); len(got) != 1 || got[0] != doc.PID {
		t.Errorf("the processes running mcp-mux __shared for the config are %v, want the one status shows (%d)", got, doc.PID)
	}
	under := procs.descendants(doc.PID)
	perServer := map[string][]int{}
	for _, pid := range under {
		if name := isServer(procs.cmdline[pid]); name != "" {
			perServer[name] = append(perServer[name], pid)
		}
	}
	for _, name := range []string{"fx", "server-everything"} {
		if len(perServer[name]) != 1 {
			t.Errorf("%d %s processes under the shared mcp-mux (pid %d) for three sessions, want 1: %v", len(perServer[name]), name, doc.PID, perServer[name])
		}
	}
	// The shared process is the child of the session that started it
	// until that one ends: below a claude process, only what is not below
	// the shared one counts.
	for _, pid := range claudes {
		for _, d := range procs.descendants(pid) {
			if !slices.Contains(under, d) && isServer(procs.cmdline[d]) != "" {
				t.Errorf("a server runs under claude process %d, not under the shared mcp-mux: %d %v", pid, d, procs.cmdline[d])
			}
		}
	}
	backendPIDs := slices.Concat(perServer["fx"], perServer["server-everything"])
	mcpMux := muxSrv.command
	sharedUse := footprint(procs, append(claudes, doc.PID), func(cl []string) bool {
		return isServer(cl) != "" || len(cl) > 0 && (cl[0] == mcpMux || slices.Contains(cl, "__shared"))
	})

	// What each model was shown is what it was shown directly.
	lastExit := shared.end(t, ctx)
	for i, s := range shared.sessions {
		if got, want := s.plan.shown(), direct.sessions[i].plan.shown(); !slices.Equal(got, want) {
			t.Errorf("session %d's model was shown %q through the shared mcp-mux, directly %q", i+1, got, want)
		}
	}

	// shared_linger 0: the shared process and the servers end with the
	// last session.
	const bound = 10 * time.Second
	gone := testkit.Poll(bound, func() bool {
		return !slices.ContainsFunc(append([]int{doc.PID}, backendPIDs...), alive) && len(leftovers(sharedDir)) == 0
	})
	goneMs := time.Since(lastExit).Milliseconds()
	if !gone {
		t.Errorf("%v after the last session exited, still running:\n%s%s", bound, strings.Join(leftovers(sharedDir), "\n"), shared.seen())
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n| session | to both results ms | exit ms | wall ms |\n|---|---|---|---|\n")
	for _, tr := range []struct {
		label string
		trio  *trio
	}{{"direct", direct}, {"shared", shared}} {
		for i, s := range tr.trio.sessions {
			s.plan.mu.Lock()
			at := s.plan.at
			s.plan.mu.Unlock()
			// Held: its exit starts at the release.
			toResults, exit := at.Sub(s.started), s.exited.Sub(tr.trio.released)
			fmt.Fprintf(&sb, "| %s %d | %d | %d | %d |\n", tr.label, i+1, toResults.Milliseconds(), exit.Milliseconds(), (toResults + exit).Milliseconds())
		}
	}
	fmt.Fprintf(&sb, "with the three held: directly %s; through the shared mcp-mux %s (mcp-mux pid %d, servers %v)\n", directUse, sharedUse, doc.PID, backendPIDs)
	fmt.Fprintf(&sb, "the shared mcp-mux and its servers all gone %d ms after the last session exited", goneMs)
	t.Log(sb.String())
}

// footprint is the processes below roots that f accepts, by command
// line: how many, and their resident memory.
func footprint(p procs, roots []int, f func(cmdline []string) bool) string {
	n, kb := 0, 0
	var seen []int
	for _, r := range roots {
		for _, pid := range p.descendants(r) {
			if slices.Contains(seen, pid) || !f(p.cmdline[pid]) {
				continue
			}
			seen = append(seen, pid)
			n++
			kb += rssKB(pid)
		}
	}
	return fmt.Sprintf("%d processes, %d MB resident", n, kb/1024)
}

// rssKB is pid's resident memory in kB (0 if it is gone).
func rssKB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	return 0
}

// anyDone is closed when any of sessions has exited.
func anyDone(sessions []*session) <-chan struct{} {
	c := make(chan struct{})
	once := sync.OnceFunc(func() { close(c) })
	for _, s := range sessions {
		go func() { <-s.done; once() }() // ends with its session
	}
	return c
}

// sharedDoc is the shared mcp-mux of the config srv runs, as
// `mcp-mux status --json` shows it (nil if none).
func sharedDoc(t *testing.T, srv server) *control.Document {
	t.Helper()
	cmd := exec.Command(srv.command, "status", "--json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Logf("mcp-mux status --json: %v\n%s", err, errOut.String())
	}
	var rep struct {
		Processes []*control.Document `json:"processes"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("mcp-mux status --json: %v\n%s", err, out.String())
	}
	var found *control.Document
	for _, d := range rep.Processes {
		if !d.Shared || d.Config != srv.args[1] {
			continue
		}
		if found != nil {
			t.Errorf("mcp-mux status --json shows two shared processes of %s: %d and %d", d.Config, found.PID, d.PID)
		}
		found = d
	}
	return found
}

// procs is a moment's processes, from /proc.
type procs struct {
	parent  map[int]int
	cmdline map[int][]string
}

func procTable() procs {
	p := procs{parent: map[int]int{}, cmdline: map[int][]string{}}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil || zombie(stat) {
			continue
		}
		// After the command's ")": state, then the parent's pid.
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			continue
		}
		p.parent[pid], _ = strconv.Atoi(f[1])
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		p.cmdline[pid] = strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00")
	}
	return p
}

// descendants are the processes below pid.
func (p procs) descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for c, parent := range p.parent {
			if parent == q {
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// matching are the processes whose command line f accepts.
func (p procs) matching(f func(cmdline []string) bool) []int {
	var out []int
	for pid, cl := range p.cmdline {
		if f(cl) {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !zombie(stat)
}
