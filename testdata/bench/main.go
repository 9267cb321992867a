//go:build linux

// Command bench measures what mcp-mux costs an agent: the same fixture
// server driven directly, through a relay that copies bytes and parses
// nothing (the floor of one extra hop), and through mcp-mux, side by side
// in one run, in interleaved rounds. It builds the binaries from this tree
// into a temporary directory, prints a Markdown table of the medians to
// stdout (progress goes to stderr) and stops every process it started.
//
//	go run ./testdata/bench [-rounds 3] [-quick] [-mux PATH] [-json] [-only stdio|http|gosdk|search|catalog|shared] [-mcpmu PATH]
//
// The HTTP rows (http.go) are a second table: the fixture serving
// Streamable HTTP itself against mcp-mux serve --http (and mcpmu serve
// --http, with -mcpmu), a stdio agent through mcp-mux to the fixture as a
// remote backend, and the memory of idle sessions. The search_tools rows
// (search.go) are a third: mcp-mux in search mode over ~400 and ~4,000
// real tool definitions. The go-sdk client's rows (gosdk.go) are HTTP rows
// too: the client as Go agents use it, in the current era. The catalog
// rows (catalog.go) are a fourth table: the 20 servers of
// testdata/toolsearch (or fixtures standing in for them) started directly
// and through mcp-mux, with and without its memory of their catalogs. The
// shared row (shared.go) is a fifth: ten agent sessions on five of those
// servers, each starting them itself, each through its own mcp-mux, and all
// through one shared mcp-mux.
//
// Speed targets are reported, never asserted: it fails only when something
// does not work (a request fails, a process does not start).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"
)

// bench is one run's settings and state.
type bench struct {
	dir                     string // temporary: binaries, configs, logs
	mux, fixture, relay     string // binaries
	bridge                  string // binary: the go-sdk rows' floor of a hop (gosdk.go)
	muxFrom                 string // what the mcp-mux binary is
	before                  string // another mcp-mux binary, measured alongside (-before)
	modes                   []mode // what each step measures, in this order
	rounds                  int
	warmup, latencyN        int
	duration                time.Duration
	burstN                  int
	spawnReps, startReps    int
	listReps                int
	warnings                []string
	cpuInfo                 map[mode]string
	samples                 []map[mode]sample // per round
	started                 time.Time
	measuring               time.Time     // when the measurements began (after the build)
	ours0, machine0         time.Duration // ourCPU and machineCPU then
	others                  float64       // other processes' share of the machine's CPU since
	quick, jsonOut, keepDir bool

	// The HTTP rows (http.go).
	only         string        // "", "stdio", "http", "search" or "catalog": which rows (see runs)
	mcpmu        string        // mcpmu binary (-mcpmu), "" for none
	httpModes    []mode        // the HTTP rows' columns, in this order
	httpSessions []int         // concurrent sessions of the loaded rows
	idleNs       []int         // idle sessions, in increasing order
	settle       time.Duration // before reading an idle process's RSS
	quiet        time.Duration // then before reading it again (0: not again)

	// The catalog rows (catalog.go).
	catalogKind string // -catalog-set: auto, npm or fixture
	catalog     *catalogSet

	// The shared row (shared.go).
	shared *sharedSet

	// The stdio rows against server-everything (everything.go): its argv,
	// or why they are not measured.
	everything     []string
	everythingSkip string
}

func main() {
	b := &bench{cpuInfo: map[mode]string{}, started: time.Now()}
	flag.IntVar(&b.rounds, "rounds", 3, "interleaved rounds (each runs direct, relay, mcp-mux in turn); the table shows their medians")
	flag.BoolVar(&b.quick, "quick", false, "small counts, one round: proves the benchmark works (CI), numbers are rough")
	flag.StringVar(&b.mux, "mux", "", "measure this mcp-mux binary instead of building the current tree (e.g. an older commit's)")
	flag.StringVar(&b.before, "before", "", "also measure this mcp-mux binary (e.g. an older commit's), in the same rounds, as a column of its own")
	flag.BoolVar(&b.jsonOut, "json", false, "print the per-round samples and medians as JSON instead of the table")
	flag.IntVar(&b.latencyN, "n", 3000, "requests per latency row")
	flag.DurationVar(&b.duration, "duration", 2*time.Second, "length of each throughput row")
	flag.IntVar(&b.burstN, "burst", 20000, "resources/updated notifications in the burst row")
	flag.BoolVar(&b.keepDir, "keep", false, "keep the temporary directory (binaries, configs, every process's stderr)")
	flag.StringVar(&b.only, "only", "", "run only these rows: \"stdio\" (the first table), \"http\" (serve --http, the remote backend, idle sessions, the go-sdk client's rows), \"gosdk\" (the go-sdk client's rows alone), \"search\" (search_tools at ~400 and ~4,000 tools), \"catalog\" (20 servers: spawn → the first complete tools/list, remembered or not, and the memory then) or \"shared\" (10 sessions on 5 npm servers: direct, mcp-mux in-process, mcp-mux shared)")
	flag.StringVar(&b.catalogKind, "catalog-set", "auto", "the catalog rows' 20 servers: \"npm\" (testdata/toolsearch's, installed by its setup.sh), \"fixture\" (fixtures listing their tools) or \"auto\" (npm if installed, but fixture with -quick)")
	flag.StringVar(&b.mcpmu, "mcpmu", "", "also measure this mcpmu binary (github.com/Bigsy/mcpmu) in the HTTP rows, as mcpmu serve --http --eager")
	flag.Parse()
	if os.Getenv("GOGC") == "" {
		// The client is not under test: it should take as little of the
		// machine's CPU from the processes that are as it can, and the
		// go-sdk's decoding makes most of its garbage.
		debug.SetGCPercent(400)
	}
	if b.quick {
		b.rounds, b.latencyN, b.duration, b.burstN = 1, 200, 300*time.Millisecond, 2000
		b.warmup, b.spawnReps, b.startReps, b.listReps = 20, 1, 1, 1
		b.httpSessions, b.idleNs, b.settle = []int{1, 8}, []int{100}, 200*time.Millisecond
	} else {
		b.warmup, b.spawnReps, b.startReps, b.listReps = 200, 5, 1, 3
		b.httpSessions, b.idleNs, b.settle = []int{1, 8, 64}, []int{100, 1000}, 500*time.Millisecond
		b.quiet = 15 * time.Second
	}
	if b.only != "" && !slices.Contains([]string{"stdio", "http", "gosdk", "search", "catalog", "shared"}, b.only) {
		fmt.Fprintln(os.Stderr, "bench: -only is stdio, http, gosdk, search, catalog or shared")
		os.Exit(2)
	}
	if b.catalogKind != "auto" && b.catalogKind != "npm" && b.catalogKind != "fixture" {
		fmt.Fprintln(os.Stderr, "bench: -catalog-set is auto, npm or fixture")
		os.Exit(2)
	}
	if b.rounds < 1 || b.latencyN < 1 || b.burstN < 1 || b.duration <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -rounds, -n, -burst and -duration must be positive")
		os.Exit(2)
	}

	b.modes = []mode{direct, relay, muxed}
	if b.before != "" {
		abs, err := filepath.Abs(b.before)
		if fi, serr := os.Stat(abs); err != nil || serr != nil || fi.IsDir() {
			fmt.Fprintf(os.Stderr, "bench: -before %s: not a file\n", b.before)
			os.Exit(2)
		}
		b.before = abs
		b.modes = []mode{direct, relay, before, muxed}
	}
	b.httpModes = slices.DeleteFunc(slices.Clone(b.modes), func(m mode) bool { return m == relay })
	if b.mcpmu != "" {
		abs, err := filepath.Abs(b.mcpmu)
		if fi, serr := os.Stat(abs); err != nil || serr != nil || fi.IsDir() {
			fmt.Fprintf(os.Stderr, "bench: -mcpmu %s: not a file\n", b.mcpmu)
			os.Exit(2)
		}
		b.mcpmu = abs
		b.httpModes = append(b.httpModes, mcpmu)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	go func() {
		// Ctrl-C: requests fail and run returns; should it not within a
		// few seconds, kill everything and go anyway.
		<-ctx.Done()
		time.Sleep(5 * time.Second)
		killAll()
		fmt.Fprintln(os.Stderr, "bench: interrupted")
		os.Exit(130)
	}()
	err := b.run(ctx)
	killAll()
	if b.dir != "" {
		if left := b.waitLeftovers(); len(left) > 0 && err == nil {
			err = fmt.Errorf("processes left behind (now killed): %s", strings.Join(left, ", "))
		}
		if b.keepDir {
			fmt.Fprintln(os.Stderr, "bench: kept", b.dir)
		} else {
			os.RemoveAll(b.dir)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func (b *bench) run(ctx context.Context) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if b.dir, err = os.MkdirTemp("", "mcp-mux-bench-"); err != nil {
		return err
	}
	if err := os.Mkdir(b.runDir(), 0o700); err != nil {
		return err
	}
	if err := b.build(ctx, root); err != nil {
		return err
	}
	if b.runs("http") {
		if err := b.raiseOpenFiles(); err != nil {
			return err
		}
	}
	b.measuring, b.ours0, b.machine0 = time.Now(), ourCPU(), machineCPU()
	// Every binary once before measuring: page cache, first-exec costs.
	// (The HTTP rows warm each server up before measuring it.)
	if b.runs("stdio") {
		b.everythingSetup()
		for _, m := range b.modes {
			if _, err := b.startToFullList(ctx, m, []fixtureSpec{loadFixture}, nil); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	if b.runs("catalog") {
		if err := b.catalogSetup(ctx); err != nil {
			return err
		}
	}
	if b.runs("shared") {
		if err := b.sharedSetup(); err != nil {
			return err
		}
	}
	type step struct {
		name  string
		run   func(context.Context, mode, sample) error
		modes []mode // measured in these modes, in this order
	}
	noRelay := slices.DeleteFunc(slices.Clone(b.modes), func(m mode) bool { return m == relay })
	// The remote backend's direct is the HTTP rows' (the go-sdk client over
	// HTTP to the fixture).
	muxes := slices.DeleteFunc(slices.Clone(b.modes), func(m mode) bool { return !m.isMux() })
	// mcpmu does not speak the current era.
	modernModes := slices.DeleteFunc(slices.Clone(b.httpModes), func(m mode) bool { return m == mcpmu })
	var steps []step
	if b.runs("stdio") {
		steps = append(steps,
			step{"load (latency, throughput, burst, CPU, RSS)", b.loadRun, b.modes},
			step{"latency, current era", b.currentEra, b.modes},
		)
		if b.everything != nil {
			steps = append(steps, step{"latency and throughput against server-everything (npm)", b.everythingRun, b.modes})
		}
		steps = append(steps,
			step{"spawn → first full tools/list", b.spawn, b.modes},
			step{"10 slow backends → first full tools/list", b.start10, noRelay},
			step{"resources/list 10 × 1,000", b.listing, noRelay},
		)
	}
	if b.runs("http") {
		steps = append(steps,
			step{"HTTP: tools/call, " + joinInts(b.httpSessions, "/") + " sessions", b.httpLoad, b.httpModes},
			step{"remote backend: stdio agent → mcp-mux → the fixture over HTTP", b.remoteBackend, muxes},
			step{"HTTP: idle sessions, " + joinInts(b.idleNs, " and "), b.idleSessions, b.httpModes},
			step{"HTTP: idle agents of the current era, each with a subscriptions/listen stream, " + joinInts(b.idleNs, " and "), b.idleListens, modernModes},
		)
	}
	if b.runs("gosdk") {
		steps = append(steps, step{"HTTP, the go-sdk client as Go agents use it: tools/call, 1, 8 and 32 sessions", b.gosdkLoad, b.gosdkModes()})
	}
	if b.runs("search") {
		// mcp-mux only: an older binary (-before) may not know tool_list.
		steps = append(steps, step{"search_tools at ~400 and ~4,000 tools", b.searchRun, []mode{muxed}})
	}
	if b.runs("catalog") {
		// mcp-mux only: an older binary (-before) remembers nothing.
		steps = append(steps, step{"20 servers: spawn → the first complete tools/list", b.catalogRun, []mode{direct, muxed}})
	}
	if b.runs("shared") && b.shared.skip == "" {
		// mcp-mux only: an older binary (-before) has no shared process.
		steps = append(steps, step{"10 sessions on 5 servers: direct, in-process, shared", b.sharedRun, []mode{direct, muxed}})
	}
	for r := range b.rounds {
		round := map[mode]sample{}
		for _, m := range b.allModes() {
			round[m] = sample{}
		}
		for _, st := range steps {
			for _, m := range st.modes {
				fmt.Fprintf(os.Stderr, "bench: round %d/%d: %s: %s\n", r+1, b.rounds, st.name, m)
				if err := st.run(ctx, m, round[m]); err != nil {
					return fmt.Errorf("round %d, %s, %s: %w", r+1, st.name, m, err)
				}
			}
		}
		b.samples = append(b.samples, round)
	}
	b.otherLoad()
	if b.jsonOut {
		return b.printJSON()
	}
	b.printTable(os.Stdout)
	return nil
}

// runs reports whether the rows of group ("stdio", "http", "gosdk",
// "search", "catalog" or "shared") are measured: all of them, or the one
// -only names (http has gosdk's).
func (b *bench) runs(group string) bool {
	return b.only == "" || b.only == group || group == "gosdk" && b.only == "http"
}

// runDir is MCP_MUX_RUN_DIR of every mcp-mux the run starts: the run's
// own, so that no shared mcp-mux of the user's is met or left behind.
func (b *bench) runDir() string { return filepath.Join(b.dir, "run") }

// moduleRoot is the directory of mcp-mux's go.mod, from the current
// directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			sc := bufio.NewScanner(f)
			sc.Scan()
			f.Close()
			if strings.TrimSpace(sc.Text()) == "module github.com/mcp-mux/mcp-mux" {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run it inside the mcp-mux source tree (no go.mod of github.com/mcp-mux/mcp-mux found from here up)")
		}
		dir = parent
	}
}

// build builds the fixture, the relay, the bridge and (without -mux) mcp-mux from the
// tree at root.
func (b *bench) build(ctx context.Context, root string) error {
	pkgs := []string{"./testdata/fixture", "./testdata/bench/relay", "./testdata/bench/bridge"}
	if b.mux == "" {
		pkgs = append(pkgs, ".")
		b.mux = filepath.Join(b.dir, "mcp-mux")
		b.muxFrom = "built from this tree (" + gitDescribe(root) + ")"
	} else {
		abs, err := filepath.Abs(b.mux)
		if err != nil {
			return err
		}
		if fi, err := os.Stat(abs); err != nil || fi.IsDir() {
			return fmt.Errorf("-mux %s: not a file", b.mux)
		}
		b.mux, b.muxFrom = abs, abs
	}
	b.fixture, b.relay, b.bridge = filepath.Join(b.dir, "fixture"), filepath.Join(b.dir, "relay"), filepath.Join(b.dir, "bridge")
	fmt.Fprintf(os.Stderr, "bench: building %s into %s\n", strings.Join(pkgs, " "), b.dir)
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", b.dir + string(os.PathSeparator)}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown commit"
	}
	return "commit " + strings.TrimSpace(string(out))
}

// otherLoad is how much of the machine's CPU processes not ours took
// while measuring: they make every number slower, the direct ones too.
func (b *bench) otherLoad() {
	wall := time.Since(b.measuring)
	other := (machineCPU() - b.machine0) - (ourCPU() - b.ours0)
	b.others = max(0, other.Seconds()/(wall.Seconds()*float64(runtime.NumCPU())))
	if b.others > 0.1 {
		b.warn(fmt.Sprintf("other processes used %.0f%% of the machine's CPU while this ran: every number is slower and noisier than on a quiet machine", 100*b.others))
	}
}

func (b *bench) warn(s string) {
	b.warnings = append(b.warnings, s)
	fmt.Fprintln(os.Stderr, "bench: warning:", s)
}

// waitLeftovers gives processes of the built binaries a moment to exit,
// then kills and names what is left.
func (b *bench) waitLeftovers() []string {
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := leftovers(b.dir)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var names []string
			for _, p := range left {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
				names = append(names, fmt.Sprintf("%s (pid %d)", p.comm, p.pid))
			}
			return names
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// median of every metric of mode m over the rounds.
func (b *bench) median(m mode, key string) (float64, bool) {
	var vs []float64
	for _, r := range b.samples {
		if v, ok := r[m][key]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], true
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, true
}

// total of a metric of mode m over the rounds (errors, which a median
// would hide).
func (b *bench) total(m mode, key string) (float64, bool) {
	var sum float64
	found := false
	for _, r := range b.samples {
		if v, ok := r[m][key]; ok {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

func (b *bench) printJSON() error {
	out := map[string]any{"meta": b.meta()}
	med := map[string]sample{}
	var rounds []map[string]sample
	for _, r := range b.samples {
		rr := map[string]sample{}
		for m, s := range r {
			rr[m.String()] = s
		}
		rounds = append(rounds, rr)
	}
	for _, m := range b.allModes() {
		med[m.String()] = sample{}
		for k := range b.samples[0][m] {
			med[m.String()][k], _ = b.median(m, k)
		}
	}
	out["rounds"], out["median"], out["warnings"] = rounds, med, b.warnings
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// allModes are the modes of every row, each once.
func (b *bench) allModes() []mode {
	out := slices.Clone(b.modes)
	for _, m := range append(slices.Clone(b.httpModes), b.gosdkModes()...) {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func joinInts(ns []int, sep string) string {
	var s []string
	for _, n := range ns {
		s = append(s, count(float64(n)))
	}
	return strings.Join(s, sep)
}

func (b *bench) meta() map[string]any {
	return map[string]any{
		"mux": b.muxFrom, "go": runtime.Version(), "os": runtime.GOOS + "/" + runtime.GOARCH, "cpus": runtime.NumCPU(),
		"rounds": b.rounds, "latency_n": b.latencyN, "throughput_s": b.duration.Seconds(), "burst": b.burstN,
		"spawn_reps": b.spawnReps, "list_reps": b.listReps, "elapsed_s": time.Since(b.started).Seconds(),
		"other_processes_cpu_share": b.others, "only": b.only, "mcpmu": b.mcpmu,
		"http_sessions": b.httpSessions, "idle_sessions": b.idleNs, "catalog_set": b.catalogWhy(),
	}
}

// catalogWhy says which servers the catalog rows ran ("" if none).
func (b *bench) catalogWhy() string {
	if b.catalog == nil {
		return ""
	}
	return b.catalog.why
}
