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

// TestThreeClaudeCodeSessionsShareOneMcpMux: three Claude Code sessions
// started at once in one project, with mcp-mux (shared) as their one
// server, each call a tool of each of its two backends. Their models are
// shown what a session with the two servers registered directly shows;
// meanwhile one shared mcp-mux runs one instance of each server for the
// three; after the sessions end, nothing of it is left.
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
	dirs := func(dir string) (home, work, tmp string) {
		home, work, tmp = filepath.Join(dir, "home"), filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
		for _, d := range []string{home, work, tmp} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return home, work, tmp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*runTimeout)
	defer cancel()
	open := make(chan struct{})
	close(open)

	// Directly: Claude Code starts the two servers itself.
	directDir := filepath.Join(base, "direct")
	home, work, tmp := dirs(directDir)
	direct := prepareClaude(t, ctx, directDir, home, work, tmp, twoServers(directDir), &twoCalls{message: "session-1", hold: open})
	direct.start(t)
	<-direct.done
	defer killAll(directDir)
	directResults := direct.plan.shown()
	if len(directResults) != 2 {
		t.Fatalf("direct: the model was shown %d tool results, want 2 (steps %v, %v); output:\n%s", len(directResults), direct.plan.did(), direct.err, tail(direct.out.String(), 3000))
	}

	// Through mcp-mux: three sessions at once, in one project and HOME
	// (one user's three terminals), so that they share every backend.
	sharedDir := filepath.Join(base, "shared")
	home, work, tmp = dirs(sharedDir)
	cfgSrv := muxServer(t, sharedDir, filepath.Join(sharedDir, "catalogs"), twoServers(sharedDir))
	defer killAll(sharedDir)
	hold := make(chan struct{})
	// However the test ends, the models' handlers return.
	release := sync.OnceFunc(func() { close(hold) })
	defer release()
	reached := make(chan struct{}, 3)
	sessions := make([]*session, 3)
	for i := range sessions {
		sessions[i] = prepareClaude(t, ctx, sharedDir, home, work, tmp, []server{cfgSrv},
			&twoCalls{message: fmt.Sprintf("session-%d", i+1), reached: reached, hold: hold})
	}
	for _, s := range sessions {
		s.start(t)
	}
	exited := anyDone(sessions)
	// What the user would look at: each session's output, the shared
	// process's log.
	seen := func() string {
		var sb strings.Builder
		for i, s := range sessions {
			fmt.Fprintf(&sb, "\n--- session %d (steps %v):\n%s", i+1, s.plan.did(), tail(s.out.String(), 2000))
		}
		logs, _ := filepath.Glob(filepath.Join(short, "r", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			fmt.Fprintf(&sb, "\n--- %s:\n%s", l, tail(string(b), 4000))
		}
		return sb.String()
	}
	failed := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"%s", append(args, seen())...)
	}
	for n := 0; n < len(sessions); n++ {
		select {
		case <-reached:
		case <-ctx.Done():
			failed("%d of the 3 sessions had both results in before the deadline", n)
		case <-exited:
			failed("a session exited before its two calls were done")
		}
	}

	// All three are held with both results in: one shared process, one
	// instance of each server, three sessions of claude-code.
	doc := sharedDoc(t, cfgSrv)
	if doc == nil {
		failed("mcp-mux status --json shows no shared process while three sessions use it")
	}
	claudes := make([]int, len(sessions))
	for i, s := range sessions {
		claudes[i] = s.cmd.Process.Pid
	}
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
	cfgPath := cfgSrv.args[1]
	if got := procs.matching(func(cmdline []string) bool {
		return slices.Contains(cmdline, "__shared") && slices.Contains(cmdline, cfgPath)
	}); len(got) != 1 || got[0] != doc.PID {
		t.Errorf("the processes running mcp-mux __shared for the config are %v, want the one status shows (%d)", got, doc.PID)
	}
	under := procs.descendants(doc.PID)
	everything := twoServers(sharedDir)[1].args[0]
	perServer := map[string][]int{}
	for _, pid := range under {
		cl := procs.cmdline[pid]
		switch {
		case len(cl) > 0 && cl[0] == fixture:
			perServer["fx"] = append(perServer["fx"], pid)
		case slices.Contains(cl, everything):
			perServer["server-everything"] = append(perServer["server-everything"], pid)
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
			if slices.Contains(under, d) {
				continue
			}
			if cl := procs.cmdline[d]; len(cl) > 0 && cl[0] == fixture || slices.Contains(cl, everything) {
				t.Errorf("a server runs under claude process %d, not under the shared mcp-mux: %d %v", pid, d, cl)
			}
		}
	}
	backendPIDs := slices.Concat(perServer["fx"], perServer["server-everything"])

	// What each model was shown is what the direct session's was, for its
	// own message.
	released := time.Now()
	release()
	for i, s := range sessions {
		select {
		case <-s.done:
		case <-ctx.Done():
			failed("session %d did not exit", i+1)
		}
		want := make([]string, len(directResults))
		for j, r := range directResults {
			want[j] = strings.ReplaceAll(r, "session-1", s.plan.message)
		}
		if got := s.plan.shown(); !slices.Equal(got, want) {
			t.Errorf("session %d's model was shown %q through the shared mcp-mux, directly %q", i+1, got, want)
		}
		if s.err != nil {
			t.Errorf("session %d: claude exited with %v; output:\n%s", i+1, s.err, tail(s.out.String(), 2000))
		}
	}
	lastExit := slices.MaxFunc(sessions, func(a, b *session) int { return a.exited.Compare(b.exited) }).exited

	// shared_linger 0: the shared process and the servers end with the
	// last session.
	const bound = 10 * time.Second
	gone := testkit.Poll(bound, func() bool {
		return !slices.ContainsFunc(append([]int{doc.PID}, backendPIDs...), alive) && len(leftovers(sharedDir)) == 0
	})
	goneMs := time.Since(lastExit).Milliseconds()
	if !gone {
		t.Errorf("%v after the last session exited, still running:\n%s%s", bound, strings.Join(leftovers(sharedDir), "\n"), seen())
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n| run | to both results ms | exit ms | wall ms |\n|---|---|---|---|\n")
	row := func(label string, s *session, from time.Time) {
		s.plan.mu.Lock()
		at := s.plan.at
		s.plan.mu.Unlock()
		toResults, exit := at.Sub(s.started), s.exited.Sub(from)
		fmt.Fprintf(&sb, "| %s | %d | %d | %d |\n", label, toResults.Milliseconds(), exit.Milliseconds(), (toResults + exit).Milliseconds())
	}
	direct.plan.mu.Lock()
	directAt := direct.plan.at
	direct.plan.mu.Unlock()
	row("direct", direct, directAt)
	for i, s := range sessions {
		// Held: its exit starts at the release.
		row(fmt.Sprintf("shared %d", i+1), s, released)
	}
	fmt.Fprintf(&sb, "shared mcp-mux pid %d, servers %v; all gone %d ms after the last session exited", doc.PID, backendPIDs, goneMs)
	t.Log(sb.String())
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
