//go:build linux

package main

// The catalog rows (issue: "spawn → first complete tools/list over the 20
// servers with a warm cache, ≤ 300 ms; the process tree's PSS after the
// first list with no call, ≤ 80 MB"): the twenty servers of
// testdata/toolsearch, started by the agent itself (direct), through
// mcp-mux remembering nothing (MCP_MUX_CATALOGS=off: every backend starts
// at once, as before start-when-used), and through mcp-mux with their
// catalogs remembered by a run before (start = "auto", the default: none
// starts until used). Where the npm servers are not installed (CI), twenty
// fixtures stand in for them, each listing its server's tools of
// catalog.json after a start delay such as npx's.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// Variants of the catalog rows, each a column.
const (
	catDirect = "direct"
	catCold   = "cold" // mcp-mux, MCP_MUX_CATALOGS=off
	catWarm   = "warm" // mcp-mux, the catalogs remembered
)

// Metric keys of the catalog rows, per variant.
func kCatFull(v string) string       { return "catalog_full_" + v }        // spawn → first complete tools/list
func kCatInit(v string) string       { return "catalog_init_" + v }        // spawn → the initialize response
func kCatFirst(v string) string      { return "catalog_first_" + v }       // spawn → the first tools/list response
func kCatFirstTools(v string) string { return "catalog_first_tools_" + v } // the catalog's tools in that first list
func kCatLists(v string) string      { return "catalog_lists_" + v }       // tools/list walks until complete
func kCatPSS(v string) string        { return "catalog_pss_" + v }         // the tree's PSS then
func kCatProcs(v string) string      { return "catalog_procs_" + v }       // processes in the tree then
func kCatCPU(v string) string        { return "catalog_cpu_" + v }         // the tree's CPU until then

// fixtureStartDelay is how long each stand-in fixture takes to start:
// about what a small npm server takes through npx on a quiet machine.
const fixtureStartDelay = 300 * time.Millisecond

// catalogBackend is one of the twenty servers: what runs it.
type catalogBackend struct {
	name, command string
	args          []string
	env           map[string]string
	cwd           string
}

// catalogSet is the twenty servers of a run and what the rows need.
type catalogSet struct {
	npm      bool // the npm servers of testdata/toolsearch; else fixtures
	why      string
	backends []catalogBackend
	config   string          // mcp-mux's config of them
	memory   string          // MCP_MUX_CATALOGS of the remembered runs
	want     map[string]bool // every tool as mcp-mux names it, from the direct warm-up
	filled   bool            // the warm-up has filled memory
	timeout  time.Duration   // for everything to start
}

// catalogSetup chooses the twenty servers (b.catalogSet: auto, npm or
// fixture; auto is fixture with -quick, which must stay short), writes
// mcp-mux's config of them, starts them once directly
// (which learns the complete catalog and warms the page cache) and once
// through mcp-mux remembering into a file of its own (which fills that
// memory, as check --connect would).
func (b *bench) catalogSetup(ctx context.Context) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "testdata", "toolsearch")
	set := &catalogSet{memory: filepath.Join(b.dir, "catalogs"), config: filepath.Join(b.dir, "catalog.toml")}
	kind := b.catalogKind
	if kind == "auto" && b.quick {
		kind = "fixture"
	}
	var npmErr error
	if kind != "fixture" {
		set.backends, npmErr = npmBackends(filepath.Join(dir, "mcp-mux.toml"))
		if npmErr != nil && kind == "npm" {
			return fmt.Errorf("catalog rows: -catalog-set npm: %w", npmErr)
		}
	}
	if npmErr == nil && kind != "fixture" {
		set.npm, set.timeout = true, 120*time.Second
		set.why = fmt.Sprintf("the %d npm servers of testdata/toolsearch (mcp-mux.toml, installed)", len(set.backends))
	} else {
		set.backends, err = fixtureBackends(b.fixture, filepath.Join(dir, "catalog.json"))
		if err != nil {
			return fmt.Errorf("catalog rows: %w", err)
		}
		set.timeout = 30 * time.Second
		set.why = fmt.Sprintf("%d fixtures, each listing one server's tools of testdata/toolsearch/catalog.json after a %v start delay",
			len(set.backends), fixtureStartDelay)
		switch {
		case npmErr != nil:
			set.why += " (the npm servers are not installed: " + firstLine(npmErr.Error()) + ")"
		case b.catalogKind == "auto":
			set.why += " (-quick: `-catalog-set npm` for the installed npm servers)"
		}
	}
	if err := os.WriteFile(set.config, catalogConfig(set), 0o600); err != nil {
		return fmt.Errorf("writing the mcp-mux config: %w", err)
	}
	b.catalog = set
	fmt.Fprintf(os.Stderr, "bench: catalog rows: %s\n", set.why)

	fmt.Fprintln(os.Stderr, "bench: catalog rows: warm-up: the servers directly, then through mcp-mux filling its memory")
	if err := b.catalogDirect(ctx, sample{}); err != nil {
		return fmt.Errorf("catalog warm-up, direct: %w", err)
	}
	if err := b.catalogMux(ctx, catWarm, sample{}); err != nil {
		return fmt.Errorf("catalog warm-up, mcp-mux filling its memory: %w", err)
	}
	set.filled = true
	b.checkRemembered()
	return nil
}

// checkRemembered warns when mcp-mux check says a backend of the set is
// not remembered after the warm-up: mcp-mux writes its memory apart from
// serving, and the remembering rows would then start what it lacks. A
// binary whose check says nothing of it (-mux, older) is taken at its word.
func (b *bench) checkRemembered() {
	set := b.catalog
	cmd := exec.Command(b.mux, "check", "--json", "--config", set.config)
	cmd.Env = append(os.Environ(), "MCP_MUX_CATALOGS="+set.memory)
	out, err := cmd.Output()
	var res struct {
		Starts []struct {
			Name       string
			Remembered bool
		}
	}
	if err != nil || json.Unmarshal(out, &res) != nil || len(res.Starts) == 0 {
		return
	}
	var missing []string
	for _, st := range res.Starts {
		if !st.Remembered {
			missing = append(missing, st.Name)
		}
	}
	if len(missing) > 0 {
		b.warn(fmt.Sprintf("catalog rows: after the warm-up, mcp-mux check says %d of %d backends are not remembered: %s",
			len(missing), len(res.Starts), strings.Join(missing, ", ")))
	}
}

// npmBackends are the servers of the toolsearch config, if every one of
// them is installed.
func npmBackends(path string) ([]catalogBackend, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	var out []catalogBackend
	for _, s := range cfg.Backends {
		if s.Disabled || s.URL != "" {
			continue
		}
		if fi, err := os.Stat(s.Command); err != nil || fi.IsDir() {
			return nil, fmt.Errorf("%s: %s is not installed (testdata/toolsearch/setup.sh installs it)", s.Name, s.Command)
		}
		out = append(out, catalogBackend{name: s.Name, command: s.Command, args: s.Args, env: s.Env, cwd: s.Cwd})
	}
	if len(out) == 0 {
		return nil, errors.New(path + ": no servers")
	}
	return out, nil
}

// fixtureBackends are fixtures standing in for the servers of catalog.json.
func fixtureBackends(fixture, catalog string) ([]catalogBackend, error) {
	data, err := os.ReadFile(catalog)
	if err != nil {
		return nil, err
	}
	var cat struct{ Backends []struct{ Name string } }
	if err := json.Unmarshal(data, &cat); err != nil {
		return nil, fmt.Errorf("%s: %w", catalog, err)
	}
	if len(cat.Backends) == 0 {
		return nil, fmt.Errorf("%s: no backends", catalog)
	}
	var out []catalogBackend
	for _, bk := range cat.Backends {
		out = append(out, catalogBackend{name: bk.Name, command: fixture, args: []string{
			"-name", bk.Name, "-resources", "0", "-start-delay", fixtureStartDelay.String(),
			"-catalog", catalog, "-catalog-backend", bk.Name}})
	}
	return out, nil
}

// catalogConfig is mcp-mux's config of the set: defaults but for the
// startup timeout (a server of twenty starting at once on a small machine
// can take long) and every tool listed, so that the list can be counted.
func catalogConfig(set *catalogSet) []byte {
	var w strings.Builder
	fmt.Fprintf(&w, "[mux]\nstartup_timeout = %q\ntool_list = \"all\"\n", set.timeout.String())
	for _, bk := range set.backends {
		fmt.Fprintf(&w, "\n[[backend]]\nname = %s\ncommand = %s\n", tomlString(bk.name), tomlString(bk.command))
		if len(bk.args) > 0 {
			quoted := make([]string, len(bk.args))
			for i, a := range bk.args {
				quoted[i] = tomlString(a)
			}
			fmt.Fprintf(&w, "args = [%s]\n", strings.Join(quoted, ", "))
		}
		if bk.cwd != "" {
			fmt.Fprintf(&w, "cwd = %s\n", tomlString(bk.cwd))
		}
		if len(bk.env) > 0 {
			keys := make([]string, 0, len(bk.env))
			for k := range bk.env {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var kv []string
			for _, k := range keys {
				kv = append(kv, tomlString(k)+" = "+tomlString(bk.env[k]))
			}
			fmt.Fprintf(&w, "env = { %s }\n", strings.Join(kv, ", "))
		}
	}
	return []byte(w.String())
}

// catalogRun measures the catalog rows of mode m: the servers directly, or
// through mcp-mux both remembering nothing and remembering, in an order
// that alternates from round to round.
func (b *bench) catalogRun(ctx context.Context, m mode, s sample) error {
	if m == direct {
		return b.catalogDirect(ctx, s)
	}
	order := []string{catCold, catWarm}
	if len(b.samples)%2 == 1 {
		order = []string{catWarm, catCold}
	}
	for _, v := range order {
		if err := b.catalogMux(ctx, v, s); err != nil {
			return fmt.Errorf("%s: %w", catLabel(v), err)
		}
	}
	return nil
}

// catalogDirect starts every server at once, each on a session of its
// own, as an agent does; the time is until the last has answered
// initialize and listed its tools. The first run (the warm-up) learns the
// catalog from their lists.
func (b *bench) catalogDirect(ctx context.Context, s sample) error {
	set := b.catalog
	type result struct {
		c     *client
		init  time.Duration
		names []string
		err   error
	}
	t0 := time.Now()
	results := make([]result, len(set.backends))
	var wg sync.WaitGroup
	for i, bk := range set.backends {
		var env []string
		for k, v := range bk.env {
			env = append(env, k+"="+v)
		}
		p, err := b.launchIn(direct, fmt.Sprintf("catalog-direct-%s-%d", bk.name, nextSeq()),
			append([]string{bk.command}, bk.args...), env, "", bk.cwd)
		if err != nil {
			results[i].err = err
			continue
		}
		wg.Go(func() {
			c, err := connectWithin(ctx, p, "2025-11-25", set.timeout)
			if err != nil {
				p.stop(time.Second)
				results[i].err = fmt.Errorf("%s: %w", bk.name, err)
				return
			}
			results[i].c, results[i].init = c, time.Since(t0)
			results[i].names, results[i].err = c.allTools(ctx)
		})
	}
	wg.Wait()
	took := time.Since(t0)
	var roots []int
	var first error
	var lastInit time.Duration
	for _, r := range results {
		if r.c != nil {
			roots = append(roots, r.c.p.cmd.Process.Pid)
		}
		lastInit = max(lastInit, r.init)
		if r.err != nil && first == nil {
			first = r.err
		}
	}
	tree := readTree(roots...)
	var wg2 sync.WaitGroup
	for _, r := range results {
		if r.c != nil {
			wg2.Go(r.c.close)
		}
	}
	wg2.Wait()
	b.reapTree(tree, "direct")
	if first != nil {
		return first
	}
	names := map[string]bool{}
	for i, r := range results {
		for _, n := range r.names {
			names[set.backends[i].name+"__"+n] = true
		}
	}
	if set.want == nil {
		set.want = names
	} else if len(names) != len(set.want) {
		b.warn(fmt.Sprintf("catalog rows: the servers listed %d tools directly, %d in the warm-up", len(names), len(set.want)))
	}
	s[kCatFull(catDirect)], s[kCatInit(catDirect)], s[kCatFirstTools(catDirect)] = took.Seconds(), lastInit.Seconds(), float64(len(names))
	s[kCatPSS(catDirect)], s[kCatProcs(catDirect)], s[kCatCPU(catDirect)] = float64(tree.pss), float64(len(tree.pids)), tree.cpu.Seconds()
	return nil
}

// catalogMux starts mcp-mux over the servers, remembering nothing (cold)
// or what the warm-up remembered (warm), and lists its tools until the list
// holds the whole catalog: again on each list_changed, as an agent would
// (and every 2 s without one, should one be lost: the walks say so).
func (b *bench) catalogMux(ctx context.Context, v string, s sample) error {
	set := b.catalog
	env := []string{"MCP_MUX_CATALOGS=off"}
	if v == catWarm {
		env = []string{"MCP_MUX_CATALOGS=" + set.memory}
	}
	p, err := b.launch(muxed, fmt.Sprintf("catalog-%s-%d", v, nextSeq()), []string{b.mux, "--config", set.config}, env, "")
	if err != nil {
		return err
	}
	c, err := connect(ctx, p)
	if err != nil {
		p.stop(time.Second)
		return err
	}
	s[kCatInit(v)] = time.Since(p.started).Seconds()
	var tree treeStat
	defer func() {
		c.close()
		b.reapTree(tree, catLabel(v))
	}()
	deadline := time.Now().Add(set.timeout)
	lists := 0
	for {
		names, err := c.allTools(ctx)
		if err != nil {
			return err
		}
		lists++
		have := 0
		for _, n := range names {
			if set.want[n] {
				have++
			}
		}
		if lists == 1 {
			s[kCatFirst(v)], s[kCatFirstTools(v)] = time.Since(p.started).Seconds(), float64(have)
			if v == catWarm && have < len(set.want) && set.filled {
				b.warn(fmt.Sprintf("catalog rows: remembering, the first list had %d of the %d tools: the memory lacks some backends", have, len(set.want)))
			}
		}
		// A backend is remembered before its tools are listed: once the
		// list is complete, the warm-up has filled the memory.
		if have == len(set.want) {
			s[kCatFull(v)], s[kCatLists(v)] = time.Since(p.started).Seconds(), float64(lists)
			break
		}
		if time.Now().After(deadline) {
			return c.fail("waiting for the whole catalog", fmt.Errorf("%d of %d tools listed after %d lists", have, len(set.want), lists))
		}
		select {
		case <-c.listChanged:
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tree = readTree(p.cmd.Process.Pid)
	s[kCatPSS(v)], s[kCatProcs(v)], s[kCatCPU(v)] = float64(tree.pss), float64(len(tree.pids)), tree.cpu.Seconds()
	return nil
}

// treeStat is a set of process trees at one moment.
type treeStat struct {
	pids []int
	pss  int64         // bytes: each page shared by n processes counts 1/n to each
	cpu  time.Duration // user+sys of the live processes
}

// readTree is the trees of roots: the processes and their descendants,
// each once (a root may be below another).
func readTree(roots ...int) treeStat {
	var t treeStat
	seen := map[int]bool{}
	add := func(pid int, cpu time.Duration) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		t.pids = append(t.pids, pid)
		t.cpu += cpu
		if v, err := pss(pid); err == nil {
			t.pss += v
		}
	}
	for _, r := range roots {
		if st, err := readStat(r); err == nil {
			add(r, st.cpu)
		}
		for _, d := range descendants(r) {
			add(d.pid, d.cpu)
		}
	}
	return t
}

// pss is the Pss of /proc/pid/smaps_rollup, in bytes.
func pss(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/smaps_rollup: no Pss", pid)
}

// reapTree waits for the processes of t, stopped, to be gone: the servers
// are not the benchmark's binaries, which waitLeftovers would find. What
// is still there after a while is killed and warned of.
func (b *bench) reapTree(t treeStat, what string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []int
		for _, pid := range t.pids {
			if !gone(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, pid := range left {
				st, _ := readStat(pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				names = append(names, fmt.Sprintf("%s (pid %d)", st.comm, pid))
			}
			b.warn(fmt.Sprintf("catalog rows, %s: still running 10 s after it was stopped (killed): %s", what, strings.Join(names, ", ")))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gone reports whether pid has exited: no such process, or a zombie
// waiting for its parent.
func gone(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func catLabel(v string) string {
	switch v {
	case catCold:
		return "mcp-mux remembering nothing"
	case catWarm:
		return "mcp-mux remembering"
	}
	return v
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// printCatalog is the table of the catalog rows.
func (b *bench) printCatalog(w io.Writer) {
	set := b.catalog
	fmt.Fprintf(w, "### The catalog before the backends: 20 servers, spawn → the first complete tools/list\n\n")
	fmt.Fprintf(w, "Servers: %s; %d tools in all. direct: the agent starts every server itself, each on a session of its own, "+
		"and the time is until the last has answered initialize and tools/list. mcp-mux, remembering nothing: `MCP_MUX_CATALOGS=off` "+
		"(every backend starts at once, the first list waits `first_list_wait`, 3 s, then the agent lists again on each `list_changed`). "+
		"mcp-mux, remembering: the catalogs remembered by a run before (`start = \"auto\"`, the default). Both with `tool_list = \"all\"`. "+
		"Memory: PSS (each shared page divided among the processes sharing it) of the process and everything below it "+
		"(direct: the %d servers' trees), read right after the first complete list, with no call.\n\n",
		set.why, len(set.want), len(set.backends))
	fmt.Fprintln(w, "| metric | direct | mcp-mux, remembering nothing | mcp-mux, remembering | target | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	type crow struct {
		label  string
		key    func(string) string
		unit   func(float64) string
		ratio  bool
		target string
		met    func(v float64) bool
	}
	n := float64(len(set.want))
	rows := []crow{
		{"spawn → first complete tools/list", kCatFull, dur, true, "≤ 300 ms", func(v float64) bool { return v <= 0.300 }},
		{"… spawn → the initialize response (direct: the last server's)", kCatInit, dur, false, "—", nil},
		{"… spawn → the first tools/list response", kCatFirst, dur, false, "—", nil},
		{fmt.Sprintf("… tools in that first list (of %s)", count(n)), kCatFirstTools, count, false, count(n), func(v float64) bool { return v == n }},
		{"… tools/list walks until complete (again on each list_changed)", kCatLists, count, false, "—", nil},
		{"PSS of the process tree after the first complete list, no call", kCatPSS, mb, true, "≤ 80 MB", func(v float64) bool { return v <= 80e6 }},
		{"… processes in that tree", kCatProcs, count, false, "—", nil},
		{"… CPU of that tree until then (user+sys of the processes still running)", kCatCPU, secs, true, "—", nil},
	}
	for _, r := range rows {
		d, dok := b.median(direct, r.key(catDirect))
		if r.key(catDirect) == kCatFirstTools(catDirect) {
			dok = false // the direct sessions have no "first list" of the whole
		}
		cells := []string{"—"}
		if dok {
			cells[0] = r.unit(d)
		}
		for _, v := range []string{catCold, catWarm} {
			x, ok := b.median(muxed, r.key(v))
			switch {
			case !ok:
				cells = append(cells, "—")
			case r.ratio && dok && d > 0:
				cells = append(cells, fmt.Sprintf("×%.2f (%s)", x/d, r.unit(x)))
			default:
				cells = append(cells, r.unit(x))
			}
		}
		met := ""
		if x, ok := b.median(muxed, r.key(catWarm)); ok && r.met != nil {
			met = "no"
			if r.met(x) {
				met = "yes"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.label, strings.Join(cells, " | "), r.target, met)
	}
	if set.npm {
		return
	}
	fmt.Fprintln(w, "\n(Fixtures: the start-up and memory of real servers are not in these numbers; run it where testdata/toolsearch/setup.sh has installed them.)")
}
