//go:build linux

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sample is one mode's measurements in one round; a metric not measured
// in that mode is absent.
type sample map[string]float64

// Metric keys. Durations are in seconds, sizes in bytes.
const (
	mReadP50     = "read_p50"
	mReadP99     = "read_p99"
	mCallP50     = "call_p50"
	mCallP99     = "call_p99"
	mReadP50Now  = "read_p50_current_era"
	mCallP50Now  = "call_p50_current_era"
	mReads8      = "reads8_per_s"
	mCalls1      = "calls1_per_s"
	mBurstRate   = "burst_rate"
	mBurstLost   = "burst_lost"
	mSpawn       = "spawn_tools_list"
	mSpawnInit   = "spawn_initialize"
	mStart10     = "start10_tools_list"
	mStart10Ini  = "start10_initialize"
	mStart10Bare = "start10_bare_tools_list"
	mList        = "resources_list"
	mCPU         = "cpu_self"
	mCPUBackend  = "cpu_backend"
	mRSS         = "peak_rss"

	// The client's own CPU during a row, as a fraction of one core: the
	// benchmark must not be its own bottleneck.
	cReads8 = "client_cpu_reads8"
	cCalls1 = "client_cpu_calls1"
	cBurst  = "client_cpu_burst"
)

// loadFixture is the backend of the load rows.
// It reads its stdin with the poller, in every column: read blocking, it
// sometimes stalled under the garbage collector (testdata/fixture's
// stdin_unix.go).
var loadFixture = fixtureSpec{name: "fx", args: []string{"-resources", "100", "-stdin-poller"}}

// loadRun measures every row served by one long-lived process with one
// session, then that process's CPU and peak RSS over the whole run.
func (b *bench) loadRun(ctx context.Context, m mode, s sample) error {
	p, err := b.start(m, loadFixture)
	if err != nil {
		return err
	}
	c, err := connect(ctx, p)
	if err != nil {
		p.stop(time.Second)
		return err
	}
	defer c.close()
	echo := toolName(m, loadFixture.name, "echo")
	read, call, err := b.latencies(ctx, c, echo)
	if err != nil {
		return err
	}
	s[mReadP50], s[mReadP99] = percentile(read, 50), percentile(read, 99)
	s[mCallP50], s[mCallP99] = percentile(call, 50), percentile(call, 99)

	rate, cpu, err := throughput(ctx, 8, b.duration, func(i int) error { return c.readResource(ctx, loadURI(i)) })
	if err != nil {
		return err
	}
	s[mReads8], s[cReads8] = rate, cpu
	rate, cpu, err = throughput(ctx, 1, b.duration, func(int) error { _, err := c.callTool(ctx, echo, echoArgs); return err })
	if err != nil {
		return err
	}
	s[mCalls1], s[cCalls1] = rate, cpu

	if err := b.burst(ctx, c, m, s); err != nil {
		return err
	}

	// CPU and peak RSS of the whole run, read before the process ends.
	pid := p.cmd.Process.Pid
	self, err := readStat(pid)
	if err != nil {
		return fmt.Errorf("%s: reading its CPU time: %w", m, err)
	}
	s[mCPU] = self.cpu.Seconds()
	if m == direct {
		s[mCPUBackend] = self.cpu.Seconds()
	} else {
		var below time.Duration
		var parts []string
		for _, d := range descendants(pid) {
			below += d.cpu
			parts = append(parts, fmt.Sprintf("%s %.2f s", d.comm, d.cpu.Seconds()))
		}
		s[mCPUBackend] = below.Seconds()
		b.cpuInfo[m] = fmt.Sprintf("itself %.2f s; below it: %s", self.cpu.Seconds(), strings.Join(parts, ", "))
	}
	rss, err := peakRSS(pid)
	if err != nil {
		return fmt.Errorf("%s: reading its peak RSS: %w", m, err)
	}
	s[mRSS] = float64(rss)
	return nil
}

// loadURI is the i-th read's resource: the load fixture's 100 in turn.
func loadURI(i int) string { return fmt.Sprintf("fixture://%s/res/%d", loadFixture.name, i%100+1) }

// latencies waits for the load fixture's tool (echo, as c's server names
// it), warms the session up (connections, caches, the GC's pacing), then
// times latencyN reads and latencyN calls of echo, one at a time.
func (b *bench) latencies(ctx context.Context, c *client, echo string) (read, call []time.Duration, err error) {
	if _, err := c.waitFullTools(ctx, []string{echo}); err != nil {
		return nil, nil, err
	}
	for i := range b.warmup {
		if err := c.readResource(ctx, loadURI(i)); err != nil {
			return nil, nil, err
		}
		if _, err := c.callTool(ctx, echo, echoArgs); err != nil {
			return nil, nil, err
		}
	}
	read, call = make([]time.Duration, b.latencyN), make([]time.Duration, b.latencyN)
	for i := range read {
		t := time.Now()
		if err := c.readResource(ctx, loadURI(i)); err != nil {
			return nil, nil, err
		}
		read[i] = time.Since(t)
	}
	for i := range call {
		t := time.Now()
		if _, err := c.callTool(ctx, echo, echoArgs); err != nil {
			return nil, nil, err
		}
		call[i] = time.Since(t)
	}
	return read, call, nil
}

// currentEra measures the latency rows for a client of the current era
// (2026-07-28), which sends its version and capabilities in every
// request's _meta instead of an initialize: a process of its own, as a
// stdio server serves one client.
func (b *bench) currentEra(ctx context.Context, m mode, s sample) error {
	p, err := b.start(m, loadFixture)
	if err != nil {
		return err
	}
	c, err := connectAt(ctx, p, "")
	if err != nil {
		p.stop(time.Second)
		return err
	}
	defer c.close()
	if v := c.cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		return fmt.Errorf("%s: the session is at %s, not the current era", m, v)
	}
	read, call, err := b.latencies(ctx, c, toolName(m, loadFixture.name, "echo"))
	if err != nil {
		return err
	}
	s[mReadP50Now], s[mCallP50Now] = percentile(read, 50), percentile(call, 50)
	return nil
}

// throughput runs op from callers goroutines for d and returns completed
// ops per second and the client's CPU over that time as a fraction of one
// core.
func throughput(ctx context.Context, callers int, d time.Duration, op func(i int) error) (rate, clientCPU float64, err error) {
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	cpu0, t0 := selfCPU(), time.Now()
	stop := t0.Add(d)
	for g := range callers {
		wg.Go(func() {
			for i := g; time.Now().Before(stop); i += callers {
				if err := op(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(t0), selfCPU()-cpu0
	if firstErr != nil {
		return 0, 0, firstErr
	}
	return float64(done.Load()) / elapsed.Seconds(), cpu.Seconds() / elapsed.Seconds(), ctx.Err()
}

// burst subscribes to one resource and has the fixture send b.burstN
// resources/updated for it; rate is from the tools/call to the last update
// that arrives. A reading agent must get every one of them.
func (b *bench) burst(ctx context.Context, c *client, m mode, s sample) error {
	uri := fmt.Sprintf("fixture://%s/res/1", loadFixture.name)
	sctx, cancel := context.WithTimeout(ctx, reqTimeout)
	err := c.cs.Subscribe(sctx, &mcp.SubscribeParams{URI: uri})
	cancel()
	if err != nil {
		return c.fail("resources/subscribe", err)
	}
	c.updates.Store(0)
	c.updateURI.Store(&uri)
	defer c.updateURI.Store(nil)

	cpu0, t0 := selfCPU(), time.Now()
	// The tools/call returns once the fixture has written every update; it
	// may take long through a slow hop, so it gets a deadline of its own.
	callDone := make(chan error, 1)
	var callTook time.Duration
	go func() {
		cctx, cancel := context.WithTimeout(ctx, burstTimeout(b.burstN))
		defer cancel()
		_, err := c.cs.CallTool(cctx, &mcp.CallToolParams{Name: toolName(m, loadFixture.name, "update"),
			Arguments: map[string]any{"uri": uri, "count": b.burstN}})
		callTook = time.Since(t0)
		callDone <- err
	}()
	// Wait for all of them, or until none has come for stall after the
	// call returned.
	const stall = 3 * time.Second
	var callErr error
	returned := false
	lastSeen, lastChange := int64(0), time.Now()
	for {
		n := c.updates.Load()
		if n != lastSeen {
			lastSeen, lastChange = n, time.Now()
		}
		if n >= int64(b.burstN) && returned {
			break
		}
		if returned && time.Since(lastChange) > stall {
			break
		}
		select {
		case callErr = <-callDone:
			returned = true
			if callErr != nil {
				return c.fail("tools/call update", callErr)
			}
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	got := c.updates.Load()
	last := time.Unix(0, c.lastUpdate.Load())
	took := last.Sub(t0)
	cpu := selfCPU() - cpu0
	if got > 0 {
		s[mBurstRate] = float64(got) / took.Seconds()
	}
	s[mBurstLost] = float64(int64(b.burstN) - got)
	s[cBurst] = cpu.Seconds() / time.Since(t0).Seconds()
	if got != int64(b.burstN) {
		b.warn(fmt.Sprintf("%s: burst: %d of %d updates arrived (%d lost); the tools/call returned after %v, the last update %v after the call; the client used %.0f%% of a core",
			m, got, b.burstN, int64(b.burstN)-got, callTook.Round(time.Millisecond), took.Round(time.Millisecond), 100*s[cBurst]))
	}
	uctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	if err := c.cs.Unsubscribe(uctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		return c.fail("resources/unsubscribe", err)
	}
	return nil
}

func burstTimeout(n int) time.Duration {
	return max(60*time.Second, time.Duration(n)*5*time.Millisecond)
}

// spawn is process start to the first full tools/list, the median of
// b.spawnReps starts.
func (b *bench) spawn(ctx context.Context, m mode, s sample) error {
	return b.startTimes(ctx, m, []fixtureSpec{loadFixture}, b.spawnReps, s, mSpawn, mSpawnInit)
}

// startTimes records the median of reps starts of fs to the first full
// tools/list as full, and the median time to the initialize response as
// init.
func (b *bench) startTimes(ctx context.Context, m mode, fs []fixtureSpec, reps int, s sample, full, init string) error {
	var inits []time.Duration
	d, err := b.repeat(reps, func() (time.Duration, error) {
		st, err := b.startToFullList(ctx, m, fs, nil)
		inits = append(inits, st.init)
		return st.full, err
	})
	if err != nil {
		return err
	}
	s[full], s[init] = d, percentile(inits, 50)
	return nil
}

// start10 is ten backends that each take 200 ms to start, through mcp-mux;
// in direct mode one such backend alone, and the ten started at once with
// no mcp-mux (start10Bare).
func (b *bench) start10(ctx context.Context, m mode, s sample) error {
	n := 1
	if m.isMux() {
		n = 10
	}
	var fs []fixtureSpec
	for i := range n {
		fs = append(fs, slowFixture(i))
	}
	if err := b.startTimes(ctx, m, fs, b.startReps, s, mStart10, mStart10Ini); err != nil {
		return err
	}
	if m != direct {
		return nil
	}
	d, err := b.repeat(b.startReps, func() (time.Duration, error) { return b.start10Bare(ctx) })
	s[mStart10Bare] = d
	return err
}

func slowFixture(i int) fixtureSpec {
	return fixtureSpec{name: fmt.Sprintf("slow%d", i), args: []string{"-start-delay", "200ms"}}
}

// start10Bare starts the ten slow backends at once, each on a session of
// its own, and is the time until the last has listed its tools: what this
// machine takes to start ten such processes side by side, which no
// multiplexer of them can beat.
func (b *bench) start10Bare(ctx context.Context) (time.Duration, error) {
	t := time.Now()
	errs := make(chan error, 10)
	listed := make(chan struct{})
	for i := range 10 {
		f := slowFixture(i)
		p, err := b.start(direct, f)
		if err != nil {
			errs <- err
			continue
		}
		go func() {
			c, err := connect(ctx, p)
			if err != nil {
				p.stop(time.Second)
				errs <- err
				return
			}
			_, err = c.waitFullTools(ctx, []string{toolName(direct, f.name, "echo")})
			errs <- err
			<-listed // none stops while another is still starting
			c.close()
		}()
	}
	var took time.Duration
	var first error
	for range 10 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
		took = time.Since(t)
	}
	close(listed)
	return took, first
}

// listing is a full resources/list walk, through mcp-mux of ten backends
// with 1,000 resources each, else of one such backend; the median of
// b.listReps walks over one session.
func (b *bench) listing(ctx context.Context, m mode, s sample) error {
	n := 1
	if m.isMux() {
		n = 10
	}
	var fs []fixtureSpec
	for i := range n {
		fs = append(fs, fixtureSpec{name: fmt.Sprintf("list%d", i), args: []string{"-resources", "1000"}})
	}
	_, err := b.startToFullList(ctx, m, fs, func(c *client) error {
		d, err := b.repeat(b.listReps, func() (time.Duration, error) {
			t := time.Now()
			got, pages, err := c.allResources(ctx)
			took := time.Since(t)
			if err == nil && got < 1000*n {
				err = fmt.Errorf("%s: resources/list: %d resources in %d pages, want at least %d", m, got, pages, 1000*n)
			}
			return took, err
		})
		s[mList] = d
		return err
	})
	return err
}

// startTimes are the times from process start to the initialize response
// and to the first full tools/list, which took lists tools/list walks.
type startTimes struct {
	init, full time.Duration
	lists      int
}

// startToFullList starts mode m with fixtures, connects and lists tools
// until every fixture's echo tool is there; then runs then (if any) on the
// session and stops everything.
func (b *bench) startToFullList(ctx context.Context, m mode, fs []fixtureSpec, then func(*client) error) (startTimes, error) {
	var st startTimes
	p, err := b.start(m, fs...)
	if err != nil {
		return st, err
	}
	c, err := connect(ctx, p)
	if err != nil {
		p.stop(time.Second)
		return st, err
	}
	st.init = time.Since(p.started)
	defer c.close()
	var want []string
	for _, f := range fs {
		want = append(want, toolName(m, f.name, "echo"))
	}
	st.lists, err = c.waitFullTools(ctx, want)
	st.full = time.Since(p.started)
	if err == nil && then != nil {
		err = then(c)
	}
	return st, err
}

// repeat runs f n times and returns the median, in seconds.
func (b *bench) repeat(n int, f func() (time.Duration, error)) (float64, error) {
	ds := make([]time.Duration, 0, n)
	for range n {
		d, err := f()
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	return percentile(ds, 50), nil
}

// percentile of ds (sorted in place), in seconds.
func percentile(ds []time.Duration, p int) float64 {
	slices.Sort(ds)
	i := min(len(ds)*p/100, len(ds)-1)
	return ds[i].Seconds()
}
