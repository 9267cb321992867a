//go:build linux

package main

// The shared row (issue 45: "ten sessions each using the same five of the
// 20 npm servers of testdata/toolsearch — processes and PSS of everything
// mcp-mux started, direct vs in-process mcp-mux vs shared, in one run
// (targets: processes ≤ sessions + 6, PSS ≤ 250 MB), and the per-call cost
// of the extra hop against in-process (call p50 within ×1.1)"). Ten agent
// sessions, each a go-sdk client as in the other rows, list and call a tool
// of the same five servers, three ways: each session starting the five
// itself (direct), each its own mcp-mux serving in-process
// (MCP_MUX_SHARED=0) with its own five, and each a session mcp-mux relaying
// to the one long-lived mcp-mux that serves them all (the default). Only
// npm servers make this row's memory mean anything: without them it is
// skipped, and it is not part of -quick (CI), which `-only shared` runs
// with fewer calls.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sharedSessions is how many agent sessions the row runs at once.
const sharedSessions = 10

// sharedServer is one of the five servers and the call every session makes
// of it: each answers at once without the network (the ones that would
// reach a service are pointed at a closed port on loopback).
type sharedServer struct {
	name, tool string
	args       map[string]any
	env        map[string]string // over the toolsearch config's
}

var sharedServers = []sharedServer{
	{name: "filesystem", tool: "list_allowed_directories", args: map[string]any{}},
	{name: "memory", tool: "read_graph", args: map[string]any{}},
	{name: "postgres", tool: "query", args: map[string]any{"sql": "select 1"}},
	{name: "gitlab", tool: "search_repositories", args: map[string]any{"search": "mcp"}},
	{name: "firecrawl", tool: "firecrawl_scrape", args: map[string]any{"url": "http://127.0.0.1:9/"},
		env: map[string]string{"FIRECRAWL_API_URL": "http://127.0.0.1:9"}},
}

// sharedTimed is the call timed one at a time from every session: the
// filesystem server's, which reads nothing but its arguments. It is the
// first server's, so that every session's first client makes it.
const sharedTimed = 0

// The row's ways, each a column.
const (
	shDirect  = "direct"
	shInProc  = "in-process"
	shShared  = "shared"
	shEnvOff  = "MCP_MUX_SHARED=0"
	shEnvOn   = "MCP_MUX_SHARED=1"
	shRunDir  = "MCP_MUX_RUN_DIR"
	shCmdName = "__shared" // argv[1] of the long-lived process
)

// Metric keys of the shared row, per way.
func kShProcs(v string) string { return "shared_procs_" + v } // processes started, all at once
func kShPSS(v string) string   { return "shared_pss_" + v }   // their PSS then
func kShReady(v string) string { return "shared_ready_" + v } // start → every session listed and called the five
func kShCall(v string) string  { return "shared_call_p50_" + v }
func kShFound(v string) string { return "shared_found_" + v } // the long-lived processes found (shared way)

// sharedSet is the row's servers and what its runs share.
type sharedSet struct {
	backends []catalogBackend // the five, as the toolsearch config has them, env overridden
	config   string           // mcp-mux's config of them
	runDir   string           // MCP_MUX_RUN_DIR of every mcp-mux of the row
	calls    int              // timed calls per session
	skip     string           // why the row is not run ("" if it is)
	outcome  map[string]string
	kinds    map[string]string // per way: the processes by name, the last round's
	mu       sync.Mutex
}

// sharedSetup finds the five servers (installed by testdata/toolsearch's
// setup.sh) and writes mcp-mux's config of them; where they are not
// installed, or under -quick without -only shared, the row says why it was
// skipped instead.
func (b *bench) sharedSetup() error {
	set := &sharedSet{calls: 100, outcome: map[string]string{}, kinds: map[string]string{}}
	b.shared = set
	if b.quick {
		if b.only != "shared" {
			set.skip = "not part of -quick (CI); `-only shared` runs it"
			return nil
		}
		set.calls = 10
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	all, err := npmBackends(filepath.Join(root, "testdata", "toolsearch", "mcp-mux.toml"))
	if err != nil {
		set.skip = "the npm servers are not installed: " + firstLine(err.Error())
		fmt.Fprintln(os.Stderr, "bench: shared row skipped:", set.skip)
		return nil
	}
	for _, s := range sharedServers {
		i := slices.IndexFunc(all, func(bk catalogBackend) bool { return bk.name == s.name })
		if i < 0 {
			return fmt.Errorf("shared row: testdata/toolsearch/mcp-mux.toml has no %s", s.name)
		}
		bk := all[i]
		env := map[string]string{}
		for k, v := range bk.env {
			env[k] = v
		}
		for k, v := range s.env {
			env[k] = v
		}
		if s.name == "memory" {
			env["MEMORY_FILE_PATH"] = filepath.Join(b.dir, "shared-memory.jsonl")
		}
		bk.env = env
		set.backends = append(set.backends, bk)
	}
	set.config = filepath.Join(b.dir, "shared.toml")
	cfg := catalogConfig(&catalogSet{backends: set.backends, timeout: 120 * time.Second})
	if err := os.WriteFile(set.config, cfg, 0o600); err != nil {
		return fmt.Errorf("writing the mcp-mux config: %w", err)
	}
	set.runDir = b.runDir()
	return nil
}

// sharedRun measures the row's ways: direct in direct mode; in-process and
// shared, in an order that alternates from round to round, in mcp-mux's.
func (b *bench) sharedRun(ctx context.Context, m mode, s sample) error {
	if m == direct {
		return b.sharedWay(ctx, shDirect, s)
	}
	order := []string{shInProc, shShared}
	if len(b.samples)%2 == 1 {
		order = []string{shShared, shInProc}
	}
	for _, v := range order {
		if err := b.sharedWay(ctx, v, s); err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
	}
	return nil
}

// sharedAgent is one agent session of the row: its clients (one per
// server directly, else one) and its processes.
type sharedAgent struct {
	clients []*client
	names   []string // the five calls' tool names, as its clients see them
}

// sharedWay starts the ten sessions at once, each listing the five
// servers' tools and calling one of each; then, with all of them still
// open, reads what processes there are and their PSS, and times the
// filesystem call from each session in turn.
func (b *bench) sharedWay(ctx context.Context, v string, s sample) error {
	set := b.shared
	t0 := time.Now()
	agents := make([]*sharedAgent, sharedSessions)
	errs := make([]error, sharedSessions)
	var wg sync.WaitGroup
	for i := range agents {
		agents[i] = &sharedAgent{}
		wg.Go(func() { errs[i] = b.sharedAgent(ctx, v, agents[i]) })
	}
	wg.Wait()
	ready := time.Since(t0)
	var roots []int
	for _, a := range agents {
		for _, c := range a.clients {
			roots = append(roots, c.p.cmd.Process.Pid)
		}
	}
	var longLived []int
	if v == shShared {
		longLived = sharedProcesses(b.mux, set.runDir)
		roots = append(roots, longLived...)
	}
	tree := readTree(roots...) // the long-lived process may be below the session that started it
	defer func() {
		var wg sync.WaitGroup
		for _, a := range agents {
			for _, c := range a.clients {
				wg.Go(c.close)
			}
		}
		wg.Wait()
		b.reapTree(tree, "shared row, "+v)
	}()
	if err := firstErr(errs); err != nil {
		return err
	}

	var took []time.Duration
	for _, a := range agents {
		c := a.clients[0] // directly, the first server's; else the session's one
		for range set.calls {
			t := time.Now()
			if _, err := c.sharedCall(ctx, a.names[sharedTimed], sharedServers[sharedTimed].args); err != nil {
				return err
			}
			took = append(took, time.Since(t))
		}
	}

	s[kShProcs(v)], s[kShPSS(v)], s[kShReady(v)] = float64(len(tree.pids)), float64(tree.pss), ready.Seconds()
	s[kShCall(v)] = percentile(took, 50)
	if v == shShared {
		s[kShFound(v)] = float64(len(longLived))
	}
	set.mu.Lock()
	set.kinds[v] = byName(tree.pids)
	set.mu.Unlock()
	return nil
}

// sharedAgent starts one session of way v: the five servers directly, or
// mcp-mux over them, and lists and calls each.
func (b *bench) sharedAgent(ctx context.Context, v string, a *sharedAgent) error {
	set := b.shared
	if v == shDirect {
		for i, bk := range set.backends {
			var env []string
			for k, val := range bk.env {
				env = append(env, k+"="+val)
			}
			p, err := b.launchIn(direct, fmt.Sprintf("shared-direct-%s-%d", bk.name, nextSeq()),
				append([]string{bk.command}, bk.args...), env, "", bk.cwd)
			if err != nil {
				return err
			}
			c, err := connectWithin(ctx, p, "2025-11-25", 120*time.Second)
			if err != nil {
				p.stop(time.Second)
				return fmt.Errorf("%s: %w", bk.name, err)
			}
			a.clients = append(a.clients, c)
			a.names = append(a.names, sharedServers[i].tool)
			if err := b.sharedCheck(ctx, c, v, sharedServers[i], sharedServers[i].tool); err != nil {
				return err
			}
		}
		return nil
	}
	env := []string{shRunDir + "=" + set.runDir, shEnvOff}
	if v == shShared {
		env[1] = shEnvOn
	}
	p, err := b.launch(muxed, fmt.Sprintf("shared-%s-%d", v, nextSeq()), []string{b.mux, "--config", set.config}, env, "")
	if err != nil {
		return err
	}
	c, err := connectWithin(ctx, p, "2025-11-25", 120*time.Second)
	if err != nil {
		p.stop(time.Second)
		return err
	}
	a.clients = append(a.clients, c)
	for _, sv := range sharedServers {
		a.names = append(a.names, sv.name+"__"+sv.tool)
	}
	if _, err := c.waitFullToolsWithin(ctx, a.names, 120*time.Second); err != nil {
		return err
	}
	for i, sv := range sharedServers {
		if err := b.sharedCheck(ctx, c, v, sv, a.names[i]); err != nil {
			return err
		}
	}
	return nil
}

// sharedCheck lists c's tools (directly: the server's own list) and calls
// the server's tool; what the call gives must be what it gave directly.
func (b *bench) sharedCheck(ctx context.Context, c *client, v string, sv sharedServer, name string) error {
	if v == shDirect {
		if _, err := c.allTools(ctx); err != nil {
			return err
		}
	}
	got, err := c.sharedCall(ctx, name, sv.args)
	if err != nil {
		return err
	}
	set := b.shared
	set.mu.Lock()
	defer set.mu.Unlock()
	want, ok := set.outcome[sv.name]
	switch {
	case v == shDirect && !ok:
		set.outcome[sv.name] = got
	case ok && got != want:
		b.warn(fmt.Sprintf("shared row, %s: %s's %s gave %q, directly %q", v, sv.name, sv.tool, got, want))
	}
	return nil
}

// sharedCall calls a tool and returns what it gave: its result's first
// text, or the server's JSON-RPC error. Only a request that was not
// answered fails.
func (c *client) sharedCall(ctx context.Context, name string, args any) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	res, err := c.cs.CallTool(rctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if we := (*jsonrpc.Error)(nil); errors.As(err, &we) {
		return "error: " + we.Message, nil
	}
	if err != nil {
		return "", c.fail("tools/call "+name, err)
	}
	for _, ct := range res.Content {
		if t, ok := ct.(*mcp.TextContent); ok {
			return t.Text, nil
		}
	}
	return fmt.Sprintf("%d contents", len(res.Content)), nil
}

// sharedProcesses are the long-lived mcp-mux processes of this run: the
// binary under test, argv[1] "__shared", and the run's MCP_MUX_RUN_DIR
// (another run, or another engineer's, has its own).
func sharedProcesses(bin, runDir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(argv), "\x00")
		if len(args) < 2 || args[1] != shCmdName {
			continue
		}
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe != bin {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if slices.Contains(strings.Split(string(env), "\x00"), shRunDir+"="+runDir) {
			out = append(out, pid)
		}
	}
	return out
}

// byName is pids counted by process name, with their PSS: "5 node
// 215.3 MB, 10 mcp-mux 39.0 MB, ...".
func byName(pids []int) string {
	type kind struct {
		n   int
		pss int64
	}
	kinds := map[string]*kind{}
	for _, pid := range pids {
		st, err := readStat(pid)
		if err != nil {
			st.comm = "(gone)"
		}
		k := kinds[st.comm]
		if k == nil {
			k = &kind{}
			kinds[st.comm] = k
		}
		k.n++
		if v, err := pss(pid); err == nil {
			k.pss += v
		}
	}
	names := make([]string, 0, len(kinds))
	for name := range kinds {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := kinds[names[i]], kinds[names[j]]
		return a.pss > b.pss || a.pss == b.pss && names[i] < names[j]
	})
	var parts []string
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%d %s %s", kinds[name].n, name, mb(float64(kinds[name].pss))))
	}
	return strings.Join(parts, ", ")
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// printShared is the table of the shared row.
func (b *bench) printShared(w io.Writer) {
	set := b.shared
	fmt.Fprintf(w, "### %d agent sessions on the same five servers: direct, mcp-mux in-process, mcp-mux shared\n\n", sharedSessions)
	if set.skip != "" {
		fmt.Fprintf(w, "Skipped: %s.\n", set.skip)
		return
	}
	var names []string
	for _, s := range sharedServers {
		names = append(names, s.name)
	}
	fmt.Fprintf(w, "Servers: %s of testdata/toolsearch (npm). Each session, a go-sdk client, lists the five's tools and calls one of each "+
		"(the %d sessions started at once); then, all of them open, the processes started (everything below the sessions' clients, "+
		"and the long-lived mcp-mux with everything below it) and their PSS are read, and each session in turn calls %s's %s %d times. "+
		"direct: each session starts the five itself. in-process: each session its own mcp-mux (`%s`) and its own five. "+
		"shared: each session a session mcp-mux relaying to one long-lived mcp-mux (the default). `%s` is the run's own.\n\n",
		strings.Join(names, ", "), sharedSessions, sharedServers[sharedTimed].name, sharedServers[sharedTimed].tool, set.calls, shEnvOff, shRunDir)
	fmt.Fprintln(w, "| metric | direct | mcp-mux in-process | mcp-mux shared | target | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	get := func(v string, key func(string) string) (float64, bool) {
		if v == shDirect {
			return b.median(direct, key(v))
		}
		return b.median(muxed, key(v))
	}
	procTarget := float64(sharedSessions + 6)
	rows := []struct {
		label  string
		key    func(string) string
		unit   func(float64) string
		target string
		met    func(v float64) bool
	}{
		{"processes started, all sessions open", kShProcs, count, fmt.Sprintf("≤ %s", count(procTarget)), func(v float64) bool { return v <= procTarget }},
		{"PSS of those processes", kShPSS, mb, "≤ 250 MB", func(v float64) bool { return v <= 250e6 }},
		{"start → every session listed the five and called one of each", kShReady, dur, "—", nil},
		{fmt.Sprintf("tools/call p50, %s (one call at a time)", sharedServers[sharedTimed].tool), kShCall, dur, "≤ ×1.1 of in-process", nil},
	}
	for _, r := range rows {
		d, dok := get(shDirect, r.key)
		cells := []string{"—"}
		if dok {
			cells[0] = r.unit(d)
		}
		for _, v := range []string{shInProc, shShared} {
			x, ok := get(v, r.key)
			switch {
			case !ok:
				cells = append(cells, "—")
			case dok && d > 0:
				cells = append(cells, fmt.Sprintf("×%.2f (%s)", x/d, r.unit(x)))
			default:
				cells = append(cells, r.unit(x))
			}
		}
		met := ""
		x, ok := get(shShared, r.key)
		switch {
		case ok && r.met != nil:
			met = yesNo(r.met(x))
		case ok && r.key(shShared) == kShCall(shShared):
			if in, iok := get(shInProc, r.key); iok && in > 0 {
				cells[2] += fmt.Sprintf(", ×%.2f of in-process", x/in)
				met = yesNo(x <= 1.1*in)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.label, strings.Join(cells, " | "), r.target, met)
	}
	fmt.Fprintln(w, "\nProcesses and their PSS, the last round (`exe` is the long-lived mcp-mux, started as /proc/self/exe):")
	for _, v := range []string{shDirect, shInProc, shShared} {
		fmt.Fprintf(w, "- %s: %s.\n", v, set.kinds[v])
	}
	if n, ok := b.median(muxed, kShFound(shShared)); ok && n != 1 {
		fmt.Fprintf(w, "\n**%s long-lived mcp-mux processes (`%s`) were found in the shared way, not one**: ", count(n), shCmdName)
		if n == 0 {
			fmt.Fprintln(w, "this build serves every session in-process, and the shared column measures that.")
		} else {
			fmt.Fprintln(w, "the sessions did not all meet one.")
		}
	}
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
