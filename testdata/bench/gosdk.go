//go:build linux

package main

// The go-sdk client's HTTP rows: tools/call of the fixture's echo through
// the go-sdk's client as Go agents and gateways use it, nothing set that
// they would not set. mcp.NewClient with default options declares roots;
// Connect with no session options speaks the current era (2026-07-28) to a
// server that has it, each request stateless and carrying its _meta;
// StreamableClientTransport{Endpoint, DisableStandaloneSSE: true} shares
// http.DefaultClient between every session of the process (two idle
// connections per host: the 8 sessions' other requests dial). The other
// HTTP rows (http.go) give each session its own connections, speak the
// handshake era and open the standalone stream, which makes direct slower
// (1,340 calls/s against 2,300–2,600) and so every ratio look better.
//
// direct: the fixture serving HTTP itself; mcp-mux: serve --http with the
// fixture as a stdio backend and log_level = "error"; bridge: the least a
// process between the two must do (testdata/bench/bridge: the current era
// over HTTP, the fixture on its stdio in the handshake era, as mcp-mux
// speaks to it), the floor of the hop as the relay is the stdio rows'.
// Each cell runs for
// twice -duration (4 s by default) on sessions that made one call first;
// rounds interleave the modes. mcp-mux has the same cells again with the
// client pinned to the handshake era, the one direct negotiates.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Metric keys of the go-sdk client's rows.
const (
	kSDKErrors   = "gosdk_errors"
	kSDKProtocol = "gosdk_protocol" // the negotiated version as the number yyyymmdd
)

// gosdkSessions are the cells: concurrent sessions, one caller each.
var gosdkSessions = []int{1, 8, 32}

// A cell's client is the (era "": it speaks the current era to a
// server that has it) or, for mcp-mux only, the same pinned to the
// handshake era (era handshakeVersion), which is what direct negotiates
// (the fixture's stateful handler has no server/discover): the two tell
// apart what the era costs (the client's _meta on every request, mux's
// parking of every call for a handshake-era backend, rounds.go) and what
// the hop does.
const handshakeVersion = "2025-11-25"

// statelessDirect names direct's cells with the fixture serving the
// current era too (-stateless: the go-sdk's handler has the current era
// only without sessions), the client unpinned: mcp-mux's current era
// against a direct server's.
const statelessDirect = "stateless"

func sdkKey(era, what string, n int) string {
	switch era {
	case "":
	case statelessDirect:
		what = "current_era_direct_" + what
	case cannedDoor:
		what = "canned_" + what
	default:
		what = "handshake_" + what
	}
	return fmt.Sprintf("gosdk_%s_%d_sessions", what, n)
}
func kSDKCalls(era string, n int) string { return sdkKey(era, "calls_per_s", n) }
func kSDKP50(era string, n int) string   { return sdkKey(era, "call_p50", n) }
func cSDK(era string, n int) string      { return sdkKey(era, "client_cpu", n) }

// The client's own cost per call: its CPU time, and the bytes it
// allocated (the go-sdk's JSON decoder takes a 32 KiB buffer for every
// message it decodes, and the current era decodes more of them).
func kSDKClientCPU(era string, n int) string   { return sdkKey(era, "client_cpu_per_call", n) }
func kSDKClientAlloc(era string, n int) string { return sdkKey(era, "client_bytes_per_call", n) }

// The CPU time per call of the serving process and of what runs below it
// (mcp-mux's fixture): what a loaded machine slows but does not inflate,
// unlike the rates.
func kSDKCPU(era string, n int) string      { return sdkKey(era, "cpu_per_call", n) }
func kSDKCPUBelow(era string, n int) string { return sdkKey(era, "cpu_below_per_call", n) }

// treeCPU is pid's CPU time and that of every process below it.
func treeCPU(pid int) (self, below time.Duration) {
	if st, err := readStat(pid); err == nil {
		self = st.cpu
	}
	for _, d := range descendants(pid) {
		below += d.cpu
	}
	return self, below
}

// gosdkModes are the modes of the go-sdk client's rows: the HTTP rows'
// with the bridge second (mcpmu has no current era to compare), and
// mcp-mux on every core last: serve --http takes them only while its one
// thread is busy (mux/cores), and allCores is the same binary on two
// threads or more, always: the 1-against-2-threads rows.
func (b *bench) gosdkModes() []mode {
	modes := slices.DeleteFunc(slices.Clone(b.httpModes), func(m mode) bool { return m == mcpmu })
	return append(slices.Insert(modes, 1, bridge), allCores)
}

// startGoSDKServer starts mode m serving HTTP as the issue measured it:
// mcp-mux with log_level = "error".
func (b *bench) startGoSDKServer(ctx context.Context, m mode) (*proc, error) {
	if !m.isMux() && m != bridge {
		return b.startHTTP(ctx, m)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	seq := nextSeq()
	if m == bridge {
		argv := append([]string{b.bridge, addr, b.fixture}, httpFixture.argv()...)
		return b.launchHTTP(ctx, m, fmt.Sprintf("gosdk-bridge-%d", seq), argv, nil, addr)
	}
	cfg := filepath.Join(b.dir, fmt.Sprintf("mux-gosdk-%d.toml", seq))
	if err := os.WriteFile(cfg, muxConfigWith(b.fixture, "log_level = \"error\"\n", []fixtureSpec{httpFixture}), 0o600); err != nil {
		return nil, fmt.Errorf("writing the mcp-mux config: %w", err)
	}
	bin := b.mux
	if m == before {
		bin = b.before
	}
	var env []string
	if m == allCores {
		env = []string{"GOMAXPROCS=" + strconv.Itoa(runtime.NumCPU())}
	}
	return b.launchHTTP(ctx, m, fmt.Sprintf("gosdk-%s-%d", m, seq), []string{bin, "serve", "--http", addr, "--config", cfg}, env, addr)
}

// connectGoSDK is one agent session with p's endpoint, as the issue's
// client makes it (era ""), or that client pinned to era.
func connectGoSDK(ctx context.Context, p *proc, era string) (*mcp.ClientSession, error) {
	cctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	var opts *mcp.ClientSessionOptions
	if era != "" && era != statelessDirect {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: era}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcp-mux-bench-gosdk", Version: "0"}, nil).Connect(cctx,
		&mcp.StreamableClientTransport{Endpoint: p.url, DisableStandaloneSSE: true}, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: connecting the go-sdk client: %w", p.mode, err)
	}
	return cs, nil
}

// sdkCall is one tools/call of tool with the echo arguments; a tool error
// is an error.
func sdkCall(ctx context.Context, cs *mcp.ClientSession, tool string) error {
	ctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: echoArgs})
	if err == nil && res.IsError {
		err = fmt.Errorf("tool error %+v", res.Content)
	}
	return err
}

// closeSDK closes sessions, bounded: the server goes on.
func closeSDK(css []*mcp.ClientSession) {
	var wg sync.WaitGroup
	for _, cs := range css {
		wg.Go(func() {
			done := make(chan struct{})
			go func() { _ = cs.Close(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
			}
		})
	}
	wg.Wait()
}

// gosdkLoad measures the cells of gosdkSessions with one long-lived server
// of mode m, warmed up by a session of its own first.
func (b *bench) gosdkLoad(ctx context.Context, m mode, s sample) error {
	p, err := b.startGoSDKServer(ctx, m)
	if err != nil {
		return err
	}
	defer p.stop(5 * time.Second)
	tool := toolName(m, httpFixture.name, "echo")
	warm, err := connectGoSDK(ctx, p, "")
	if err != nil {
		return fmt.Errorf("%w\n%s stderr (last lines):\n%s", err, m, p.logTail(20))
	}
	defer closeSDK([]*mcp.ClientSession{warm})
	if err := b.sdkWarmUp(ctx, warm, tool); err != nil {
		return fmt.Errorf("%s: warm-up: %w\n%s stderr (last lines):\n%s", m, err, m, p.logTail(20))
	}
	if v, err := strconv.Atoi(strings.ReplaceAll(warm.InitializeResult().ProtocolVersion, "-", "")); err == nil {
		s[kSDKProtocol] = float64(v)
	}
	errs := 0
	eras := []string{""}
	if m.isMux() && m != allCores {
		eras = append(eras, handshakeVersion)
	}
	for _, era := range eras {
		for _, n := range gosdkSessions {
			e, err := b.gosdkCell(ctx, p, m, era, n, s)
			if err != nil {
				return err
			}
			errs += e
		}
	}
	var extra func(context.Context, sample) (int, error)
	switch m {
	case direct:
		extra = b.gosdkStateless
	case bridge:
		extra = b.gosdkCanned
	}
	if extra != nil {
		e, err := extra(ctx, s)
		if err != nil {
			return err
		}
		errs += e
	}
	s[kSDKErrors] = float64(errs)
	return nil
}

// gosdkStateless measures direct's cells again with the fixture serving
// without sessions, so in the current era (statelessDirect).
func (b *bench) gosdkStateless(ctx context.Context, s sample) (int, error) {
	addr, err := freeAddr()
	if err != nil {
		return 0, err
	}
	argv := append(append([]string{b.fixture}, httpFixture.argv()...), "-http", addr, "-stateless")
	p, err := b.launchHTTP(ctx, direct, fmt.Sprintf("gosdk-stateless-%d", nextSeq()), argv, nil, addr)
	if err != nil {
		return 0, err
	}
	defer p.stop(5 * time.Second)
	errs := 0
	for _, n := range gosdkSessions {
		if n > budgetSessions {
			continue // the table compares the eras at 1 and 8
		}
		e, err := b.gosdkCell(ctx, p, direct, statelessDirect, n, s)
		if err != nil {
			return 0, err
		}
		errs += e
	}
	return errs, nil
}

// gosdkCell measures n sessions of the client of era, one caller each, for
// twice -duration, into s; it returns the sessions and calls that failed.
func (b *bench) gosdkCell(ctx context.Context, p *proc, m mode, era string, n int, s sample) (int, error) {
	tool := toolName(m, httpFixture.name, "echo")
	var css []*mcp.ClientSession
	var failed atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			cs, err := connectGoSDK(ctx, p, era)
			if err == nil {
				// What a session sets up on its first request is not
				// what the cell measures.
				if err = sdkCall(ctx, cs, tool); err != nil {
					closeSDK([]*mcp.ClientSession{cs})
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed.Add(1)
				if first == nil {
					first = err
				}
				return
			}
			css = append(css, cs)
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.warn(fmt.Sprintf("%s: go-sdk client%s, %d sessions: %d failed to open or make a first call; the first: %v", m, eraNote(era), n, f, first))
	}
	var calls atomic.Int64
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	self0, below0 := treeCPU(p.cmd.Process.Pid)
	r := runLoad(ctx, len(css), 2*b.duration, func(g int) error {
		err := sdkCall(ctx, css[g], tool)
		if err == nil {
			calls.Add(1)
		}
		return err
	})
	self1, below1 := treeCPU(p.cmd.Process.Pid)
	runtime.ReadMemStats(&mem1)
	closeSDK(css)
	if c := calls.Load(); c > 0 {
		s[kSDKClientAlloc(era, n)] = float64(mem1.TotalAlloc-mem0.TotalAlloc) / float64(c)
		s[kSDKCPU(era, n)] = (self1 - self0).Seconds() / float64(c)
		if m.isMux() || m == bridge {
			s[kSDKCPUBelow(era, n)] = (below1 - below0).Seconds() / float64(c)
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s[kSDKCalls(era, n)], s[kSDKP50(era, n)], s[cSDK(era, n)] = r.rate, r.p50, r.clientCPU
	if r.rate > 0 {
		s[kSDKClientCPU(era, n)] = r.clientCPU / r.rate
	}
	if r.errors > 0 {
		b.warn(fmt.Sprintf("%s: go-sdk client%s, %d sessions: %d calls failed; the first: %v", m, eraNote(era), n, r.errors, r.firstErr))
	}
	return int(failed.Load()) + r.errors, nil
}

func eraNote(era string) string {
	switch era {
	case "":
		return ""
	case statelessDirect:
		return " (the fixture without sessions)"
	case cannedDoor:
		return " (-canned)"
	}
	return " at " + era
}

// sdkWarmUp lists tools until tool is there (mcp-mux may list before its
// backend is up), then calls it until b.warmup calls in a row succeed.
func (b *bench) sdkWarmUp(ctx context.Context, cs *mcp.ClientSession, tool string) error {
	deadline := time.Now().Add(30 * time.Second)
	for listed := false; !listed; {
		lctx, cancel := context.WithTimeout(ctx, reqTimeout)
		res, err := cs.ListTools(lctx, nil)
		cancel()
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		listed = slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == tool })
		if !listed {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not listed after 30 s", tool)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for streak := 0; streak < b.warmup; {
		if err := sdkCall(ctx, cs, tool); err != nil {
			if ctx.Err() != nil || time.Now().After(deadline) {
				return fmt.Errorf("tools/call %s: %w", tool, err)
			}
			streak = 0
			time.Sleep(50 * time.Millisecond)
			continue
		}
		streak++
	}
	return nil
}

// printGoSDK is the table of the go-sdk client's rows.
func (b *bench) printGoSDK(w io.Writer) {
	fmt.Fprintf(w, "### Over HTTP, the go-sdk client as Go agents use it\n\n")
	fmt.Fprintf(w, "go-sdk v1.8.0 `mcp.NewClient` with default options (it declares roots), `Connect` with none (the current era if the server has it), "+
		"`StreamableClientTransport{Endpoint, DisableStandaloneSSE: true}` (http.DefaultClient, shared), one session per caller calling the fixture's echo "+
		"back to back for %v per cell; p50 of every call of the cell. direct: the fixture serving HTTP itself; mcp-mux: `serve --http`, the fixture "+
		"a stdio backend, log_level = \"error\"; bridge: the floor of that hop, a process that does only what it must to serve the current era over HTTP "+
		"from the fixture on its stdio (testdata/bench/bridge; as the relay in the stdio rows). The fixture's stateful handler has no server/discover: direct's client falls back to "+
		"the handshake era, mcp-mux's speaks the current one; the pinned rows are mcp-mux in direct's era, and the rows of \"direct serving the current era\" "+
		"compare mcp-mux's current era with the fixture's, served without sessions. mcp-mux takes every core while several requests are in flight "+
		"while its one thread is busy, one thread otherwise (mux/cores); \"mcp-mux, every core\" is the same binary with GOMAXPROCS set to every CPU, its rule set aside.\n\n", 2*b.duration)
	modes := b.gosdkModes()
	cols := modes[1:]
	fmt.Fprint(w, "| metric | direct |")
	for _, m := range cols {
		fmt.Fprintf(w, " %s |", m)
	}
	fmt.Fprintln(w, " target | met |")
	fmt.Fprintln(w, "|---|---|"+strings.Repeat("---|", len(cols))+"---|---|")
	atMost := func(r float64) func(d, v float64) bool { return func(d, v float64) bool { return v <= r*d } }
	atLeast := func(r float64) func(d, v float64) bool { return func(d, v float64) bool { return v >= r*d } }
	type sdkRow struct {
		label, key string
		unit       func(float64) string
		ratio, sum bool
		target     string
		met        func(d, v float64) bool
		directKey  string // direct's value, when it is another key's
	}
	hs := handshakeVersion
	rows := []sdkRow{
		{"1 session: calls/s", kSDKCalls("", 1), perSec, true, false, "≥ ×0.75", atLeast(0.75), ""},
		{"1 session: tools/call p50", kSDKP50("", 1), dur, true, false, "≤ ×1.4", atMost(1.4), ""},
		{"8 sessions: calls/s", kSDKCalls("", 8), perSec, true, false, "≥ ×0.9", atLeast(0.9), ""},
		{"8 sessions: tools/call p50", kSDKP50("", 8), dur, true, false, "—", nil, ""},
		{"32 sessions: calls/s", kSDKCalls("", 32), perSec, true, false, "—", nil, ""},
		{"32 sessions: tools/call p50", kSDKP50("", 32), dur, true, false, "—", nil, ""},
		{"1 session: CPU per call of the serving process (direct: the fixture; mcp-mux, the bridge: itself)", kSDKCPU("", 1), dur, true, false, "—", nil, ""},
		{"… of the fixture below mcp-mux or the bridge", kSDKCPUBelow("", 1), dur, false, false, "—", nil, ""},
		{"8 sessions: CPU per call of the serving process", kSDKCPU("", 8), dur, true, false, "—", nil, ""},
		{"… of the fixture below mcp-mux or the bridge", kSDKCPUBelow("", 8), dur, false, false, "—", nil, ""},
		{"8 sessions: the client's CPU per call", kSDKClientCPU("", 8), dur, true, false, "—", nil, ""},
		{"8 sessions: the client's bytes allocated per call", kSDKClientAlloc("", 8), kib, true, false, "—", nil, ""},
		{"the same client pinned to " + hs + " (the era direct negotiates): 1 session: calls/s", kSDKCalls(hs, 1), perSec, true, false, "—", nil, kSDKCalls("", 1)},
		{"… 1 session: tools/call p50", kSDKP50(hs, 1), dur, true, false, "—", nil, kSDKP50("", 1)},
		{"… 8 sessions: calls/s", kSDKCalls(hs, 8), perSec, true, false, "—", nil, kSDKCalls("", 8)},
		{"… 1 session: CPU per call of mcp-mux itself", kSDKCPU(hs, 1), dur, true, false, "—", nil, kSDKCPU("", 1)},
		{"… 8 sessions: the client's CPU per call", kSDKClientCPU(hs, 8), dur, true, false, "—", nil, kSDKClientCPU("", 8)},
		{"… 8 sessions: the client's bytes allocated per call", kSDKClientAlloc(hs, 8), kib, true, false, "—", nil, kSDKClientAlloc("", 8)},
		{"… … of the fixture below it", kSDKCPUBelow(hs, 1), dur, false, false, "—", nil, ""},
		{"direct serving the current era as well (the fixture without sessions, `-stateless`: the go-sdk's handler has the current era only so): 1 session: calls/s", kSDKCalls("", 1), perSec, true, false, "—", nil, kSDKCalls(statelessDirect, 1)},
		{"… 1 session: tools/call p50", kSDKP50("", 1), dur, true, false, "—", nil, kSDKP50(statelessDirect, 1)},
		{"… 8 sessions: calls/s", kSDKCalls("", 8), perSec, true, false, "—", nil, kSDKCalls(statelessDirect, 8)},
		{"… 8 sessions: CPU per call of the serving process", kSDKCPU("", 8), dur, true, false, "—", nil, kSDKCPU(statelessDirect, 8)},
		{"errors: failed calls and sessions, all rounds", kSDKErrors, count, false, true, "0", func(_, v float64) bool { return v == 0 }, ""},
		{"protocol the client negotiated", kSDKProtocol, func(v float64) string {
			s := strconv.Itoa(int(v))
			if len(s) != 8 {
				return s
			}
			return s[:4] + "-" + s[4:6] + "-" + s[6:]
		}, false, false, "—", nil, ""},
	}
	for _, r := range rows {
		value := b.median
		if r.sum {
			value = b.total
		}
		dk := r.key
		if r.directKey != "" {
			dk = r.directKey
		}
		d, dok := value(direct, dk)
		dcell := "—"
		if dok {
			dcell = r.unit(d)
		}
		if r.directKey != "" {
			dcell = "(" + dcell + ")" // another row's
		}
		fmt.Fprintf(w, "| %s | %s |", r.label, dcell)
		for _, m := range cols {
			v, ok := value(m, r.key)
			switch {
			case !ok:
				fmt.Fprint(w, " — |")
			case r.ratio && dok && d > 0:
				fmt.Fprintf(w, " ×%.2f (%s) |", v/d, r.unit(v))
			default:
				fmt.Fprintf(w, " %s |", r.unit(v))
			}
		}
		met := ""
		if v, ok := value(muxed, r.key); ok && r.met != nil && (dok || !r.ratio) {
			met = "no"
			if r.met(d, v) {
				met = "yes"
			}
		}
		fmt.Fprintf(w, " %s | %s |\n", r.target, met)
	}
	// mcp-mux against the floor of its hop, as the stdio rows set it
	// against the relay.
	var against []string
	for _, r := range []struct {
		label, key string
	}{
		{"1 session calls/s", kSDKCalls("", 1)}, {"1 session p50", kSDKP50("", 1)},
		{"8 sessions calls/s", kSDKCalls("", 8)}, {"8 sessions CPU per call", kSDKCPU("", 8)},
		{"32 sessions calls/s", kSDKCalls("", 32)},
	} {
		f, fok := b.median(bridge, r.key)
		v, ok := b.median(muxed, r.key)
		if fok && ok && f > 0 {
			against = append(against, fmt.Sprintf("%s ×%.2f", r.label, v/f))
		}
	}
	if len(against) > 0 {
		fmt.Fprintf(w, "\nmcp-mux against the bridge (the floor of the hop), medians of the same rounds: %s.\n", strings.Join(against, ", "))
	}
	// The threads' rule against what it replaced: one thread throughout.
	var threads []string
	for _, n := range gosdkSessions {
		one, ook := b.median(allCores, kSDKCalls("", n))
		v, ok := b.median(muxed, kSDKCalls("", n))
		if ook && ok && one > 0 {
			threads = append(threads, fmt.Sprintf("%d session(s) calls/s ×%.2f", n, v/one))
		}
		if n == 1 {
			one, ook = b.median(allCores, kSDKP50("", n))
			v, ok = b.median(muxed, kSDKP50("", n))
			if ook && ok && one > 0 {
				threads = append(threads, fmt.Sprintf("its p50 ×%.2f", v/one))
			}
		}
	}
	if len(threads) > 0 {
		fmt.Fprintf(w, "\nmcp-mux by its rule (one thread unless that one is busy) against itself on every core (GOMAXPROCS=%d), medians of the same rounds: %s.\n", runtime.NumCPU(), strings.Join(threads, ", "))
	}
	b.printBudget(w)
	fmt.Fprint(w, "\nEach round's values (direct, then each other column):\n\n")
	for i, round := range b.samples {
		fmt.Fprintf(w, "- round %d:", i+1)
		for _, n := range gosdkSessions {
			fmt.Fprintf(w, " %d session(s)", n)
			for _, m := range modes {
				fmt.Fprintf(w, " %s/%s", perSec(round[m][kSDKCalls("", n)]), dur(round[m][kSDKP50("", n)]))
			}
			fmt.Fprint(w, ";")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "\nThe client's own CPU during the cells, as a share of one core:")
	for _, n := range gosdkSessions {
		for _, m := range modes {
			v, _ := b.median(m, cSDK("", n))
			fmt.Fprintf(w, " %d session(s), %s: %.0f%%;", n, m, 100*v)
		}
	}
	fmt.Fprintln(w)
}
