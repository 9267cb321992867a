//go:build linux

package main

// The HTTP rows (issue 25): tools/call of the fixture's echo over
// Streamable HTTP, go-sdk clients, each session on connections of its own,
// to the fixture serving HTTP itself (direct), to mcp-mux serve --http with
// the fixture as a stdio backend, and to mcpmu serve --http (-mcpmu); a
// stdio agent through mcp-mux to the fixture as a remote backend; and the
// memory each idle session costs the serving process.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Metric keys of the HTTP rows (see measure.go for the others).
const (
	kHTTPErrors   = "http_errors"
	kModernCalls  = "http_modern_calls_per_s"
	kModernP50    = "http_modern_call_p50"
	cModern       = "client_cpu_http_modern"
	kRemoteP50    = "remote_call_p50"
	kRemoteCalls1 = "remote_calls1_per_s"
	kRemoteCalls8 = "remote_calls8_per_s"
	kRemoteErrors = "remote_errors"
	kIdleRSS0     = "idle_rss_0"
	kIdleErrors   = "idle_errors"
	kListenRSS0   = "listen_rss_0"
	kListenErrors = "listen_errors"
	cRemote1      = "client_cpu_remote_calls1"
	cRemote8      = "client_cpu_remote_calls8"
)

func kHTTPCalls(n int) string      { return fmt.Sprintf("http_calls_per_s_%d_sessions", n) }
func kHTTPP50(n int) string        { return fmt.Sprintf("http_call_p50_%d_sessions", n) }
func cHTTP(n int) string           { return fmt.Sprintf("client_cpu_http_%d_sessions", n) }
func kIdleRSS(n int) string        { return fmt.Sprintf("idle_rss_per_session_%d", n) }
func kQuietRSS(n int) string       { return fmt.Sprintf("quiet_rss_per_session_%d", n) }
func kIdleGoroutines(n int) string { return fmt.Sprintf("idle_goroutines_per_session_%d", n) }
func kListenRSS(n int) string      { return fmt.Sprintf("listen_rss_per_stream_%d", n) }
func kListenQuiet(n int) string    { return fmt.Sprintf("listen_quiet_rss_per_stream_%d", n) }
func kListenGoroutines(n int) string {
	return fmt.Sprintf("listen_goroutines_per_stream_%d", n)
}
func kIdleOpen(n int) string { return fmt.Sprintf("idle_sessions_open_%d", n) }

// httpFixture is the backend of every HTTP row: the load fixture, whose 100
// resources the idle sessions subscribe to.
var httpFixture = loadFixture

// restartLine is what mcp-mux logs when the first agent's capabilities make
// it restart a backend that was started without them.
const restartLine = "restarting it"

// startHTTP starts mode m serving Streamable HTTP on a free loopback port,
// the fixture behind it, and waits until it accepts connections.
func (b *bench) startHTTP(ctx context.Context, m mode) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	seq := nextSeq()
	var argv, env []string
	switch m {
	case direct:
		argv = append(append([]string{b.fixture}, httpFixture.argv()...), "-http", addr)
	case muxed, before:
		cfg := filepath.Join(b.dir, fmt.Sprintf("mux-http-%d.toml", seq))
		if err := os.WriteFile(cfg, muxConfig(b.fixture, []fixtureSpec{httpFixture}), 0o600); err != nil {
			return nil, fmt.Errorf("writing the mcp-mux config: %w", err)
		}
		bin := b.mux
		if m == before {
			bin = b.before
		}
		argv = []string{bin, "serve", "--http", addr, "--config", cfg}
		if pp, err := freeAddr(); err == nil {
			env = []string{"MCP_MUX_PPROF=" + pp} // goroutines: see goroutines
		}
	case mcpmu:
		cfg, err := b.mcpmuConfig(seq)
		if err != nil {
			return nil, err
		}
		// Its state (tool cache, PID records) goes to $HOME/.config/mcpmu:
		// a home of its own in the temporary directory.
		home := filepath.Join(b.dir, "mcpmu-home")
		env = []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
		argv = []string{b.mcpmu, "serve", "--http", "--addr", addr, "--eager", "--config", cfg}
	default:
		return nil, fmt.Errorf("%s does not serve HTTP", m)
	}
	return b.launchHTTP(ctx, m, fmt.Sprintf("http-%s-%d", m, seq), argv, env, addr)
}

// launchHTTP launches argv (see launch) as mode m, serving HTTP at addr,
// and returns once it accepts connections there.
func (b *bench) launchHTTP(ctx context.Context, m mode, name string, argv, env []string, addr string) (*proc, error) {
	p, err := b.launch(m, name, argv, env, "http://"+addr+"/mcp")
	if err != nil {
		return nil, err
	}
	if err := waitListening(ctx, p, addr); err != nil {
		p.stop(time.Second)
		return nil, err
	}
	return p, nil
}

// mcpmuConfig writes mcpmu's config (JSON): the fixture as its one server,
// shared (its default), in the default namespace.
func (b *bench) mcpmuConfig(seq int) (string, error) {
	cfg := map[string]any{"servers": map[string]any{httpFixture.name: map[string]any{
		"command": b.fixture, "args": httpFixture.argv(), "env": map[string]string{"GOTRACEBACK": "system"},
	}}}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(b.dir, fmt.Sprintf("mcpmu-%d.json", seq))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing the mcpmu config: %w", err)
	}
	return path, nil
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitListening waits until p accepts connections at addr.
func waitListening(ctx context.Context, p *proc, addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.waited:
			return fmt.Errorf("%s exited before listening on %s: %v\n%s stderr (last lines):\n%s", p.mode, addr, p.waitErr, p.mode, p.logTail(20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: nothing listening on %s after 30 s\n%s stderr (last lines):\n%s", p.mode, addr, p.mode, p.logTail(20))
		}
	}
}

// connectHTTP initializes a session with p's endpoint at protocol
// 2025-11-25 (the handshake era, which has sessions), on an HTTP client of
// its own: every session has its own connections, as separate agents do.
func connectHTTP(ctx context.Context, p *proc) (*client, error) {
	return connectHTTPAt(ctx, p, "2025-11-25")
}

// modernVersion is the current era's protocol: no initialize, no session,
// each request served on its own (stateless).
const modernVersion = "2026-07-28"

// connectHTTPAt is connectHTTP at protocol version.
func connectHTTPAt(ctx context.Context, p *proc, version string) (*client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // loopback, whatever the environment says
	c := &client{p: p, tr: tr, listChanged: make(chan struct{}, 1)}
	cctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcp-mux-bench", Version: "0"}, c.options()).Connect(cctx,
		&mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: &http.Client{Transport: tr}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("%s: connecting over HTTP at %s: %w", p.mode, version, err)
	}
	c.cs = cs
	return c, nil
}

// closeSession ends an HTTP session (the client's DELETE), bounded, and
// closes its connections; the server goes on.
func (c *client) closeSession() {
	done := make(chan struct{})
	go func() {
		_ = c.cs.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	c.tr.CloseIdleConnections()
}

// openSessions connects n more HTTP sessions to p, a few at a time, and
// runs then (if any) on each; a session that fails is counted (and the
// first failure warned about, with the count), not kept.
func (b *bench) openSessions(ctx context.Context, p *proc, n int, then func(i int, c *client) error) ([]*client, int) {
	out := make([]*client, n)
	var failed atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(n, 8) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				c, err := connectHTTP(ctx, p)
				if err == nil && then != nil {
					if err = then(i, c); err != nil {
						c.closeSession()
					}
				}
				if err != nil {
					failed.Add(1)
					once.Do(func() { first = err })
					continue
				}
				out[i] = c
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.warn(fmt.Sprintf("%s: %d of %d HTTP sessions failed to open; the first: %v", p.mode, f, n, first))
	}
	return slices.DeleteFunc(out, func(c *client) bool { return c == nil }), int(failed.Load())
}

// closeSessions closes every session of cs, a few at a time.
func closeSessions(cs []*client) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(len(cs), 32) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(cs) {
					return
				}
				cs[i].closeSession()
			}
		})
	}
	wg.Wait()
}

// callOnce is one tools/call of tool with the echo arguments; a tool error
// is an error.
func callOnce(ctx context.Context, c *client, tool string) error {
	ctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: echoArgs})
	if err == nil && res.IsError {
		err = fmt.Errorf("tool error %+v", res.Content)
	}
	return err
}

// warmUp waits until tool is listed, then calls it until b.warmup calls in
// a row succeed with no backend restart logged meanwhile: the first agent
// session of mcp-mux may restart the backend (its capabilities came after
// the backend started), and calls fail or wait until it is back. logOf is
// the process whose log says so.
func (b *bench) warmUp(ctx context.Context, c *client, logOf *proc, tool string) error {
	if _, err := c.waitFullTools(ctx, []string{tool}); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		restarts := logCount(logOf, restartLine)
		for streak := 0; streak < b.warmup; {
			err := callOnce(ctx, c, tool)
			if err == nil {
				streak++
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Now().After(deadline) {
				return c.fail("warm-up: tools/call "+tool+" still failing after 30 s", err)
			}
			streak = 0
			time.Sleep(50 * time.Millisecond)
		}
		if logCount(logOf, restartLine) == restarts {
			return nil
		}
	}
}

// logCount is how many times s is in p's stderr log.
func logCount(p *proc, s string) int {
	data, _ := os.ReadFile(p.logPath)
	return strings.Count(string(data), s)
}

// loadResult is one loaded row: calls that succeeded per second, their
// p50, those that failed, and the client's CPU as a share of one core.
type loadResult struct {
	rate, p50, clientCPU float64
	errors               int
	firstErr             error
}

// runLoad runs op from callers goroutines, back to back, for d, timing each
// call; a failed call is counted, not fatal.
func runLoad(ctx context.Context, callers int, d time.Duration, op func(g int) error) loadResult {
	lat := make([][]time.Duration, callers)
	var errs atomic.Int64
	var r loadResult
	var once sync.Once
	var wg sync.WaitGroup
	cpu0, t0 := selfCPU(), time.Now()
	stop := t0.Add(d)
	for g := range callers {
		wg.Go(func() {
			for time.Now().Before(stop) && ctx.Err() == nil {
				t := time.Now()
				if err := op(g); err != nil {
					errs.Add(1)
					once.Do(func() { r.firstErr = err })
					time.Sleep(10 * time.Millisecond) // a failing server must not make this a busy loop
					continue
				}
				lat[g] = append(lat[g], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(t0), selfCPU()-cpu0
	all := slices.Concat(lat...)
	r.rate, r.clientCPU, r.errors = float64(len(all))/elapsed.Seconds(), cpu.Seconds()/elapsed.Seconds(), int(errs.Load())
	if len(all) > 0 {
		r.p50 = percentile(all, 50)
	}
	return r
}

// startWarmHTTP starts mode m serving HTTP and warms it up through one
// session, warm, which stays open; stop ends both.
func (b *bench) startWarmHTTP(ctx context.Context, m mode) (p *proc, warm *client, stop func(), err error) {
	p, err = b.startHTTP(ctx, m)
	if err != nil {
		return nil, nil, nil, err
	}
	warm, err = connectHTTP(ctx, p)
	if err == nil {
		err = b.warmUp(ctx, warm, p, toolName(m, httpFixture.name, "echo"))
		if err != nil {
			warm.closeSession()
		}
	}
	if err != nil {
		p.stop(5 * time.Second)
		return nil, nil, nil, err
	}
	return p, warm, func() { warm.closeSession(); p.stop(5 * time.Second) }, nil
}

// idleBaseline is p's RSS and goroutines (if it counts them: ok) once it
// has been idle for b.settle: what the per-session rows subtract.
func (b *bench) idleBaseline(p *proc, m mode) (rss0 int64, g0 int, ok bool, err error) {
	time.Sleep(b.settle)
	g0, ok = goroutines(p)
	if rss0, err = rss(p.cmd.Process.Pid); err != nil {
		return 0, 0, false, fmt.Errorf("%s: reading its RSS: %w", m, err)
	}
	return rss0, g0, ok, nil
}

// httpLoad measures calls/s and p50 over b.httpSessions sessions (each
// one caller, back to back) with one long-lived server of mode m.
func (b *bench) httpLoad(ctx context.Context, m mode, s sample) error {
	p, _, stop, err := b.startWarmHTTP(ctx, m)
	if err != nil {
		return err
	}
	defer stop()
	tool := toolName(m, httpFixture.name, "echo")
	errs := 0
	for _, n := range b.httpSessions {
		// One call on each new session first: what a session sets up on
		// its first request is not what the row measures.
		cs, failed := b.openSessions(ctx, p, n, func(_ int, c *client) error { return callOnce(ctx, c, tool) })
		r := runLoad(ctx, len(cs), b.duration, func(g int) error { return callOnce(ctx, cs[g], tool) })
		closeSessions(cs)
		if err := ctx.Err(); err != nil {
			return err
		}
		s[kHTTPCalls(n)], s[kHTTPP50(n)], s[cHTTP(n)] = r.rate, r.p50, r.clientCPU
		errs += failed + r.errors
		if r.errors > 0 {
			b.warn(fmt.Sprintf("%s: HTTP, %d sessions: %d calls failed; the first: %v", m, n, r.errors, r.firstErr))
		}
	}
	// An agent of the current era, one caller (mcpmu does not speak it).
	if m != mcpmu {
		c, err := connectHTTPAt(ctx, p, modernVersion)
		if err != nil {
			return err
		}
		defer c.closeSession()
		if err := callOnce(ctx, c, tool); err != nil {
			return c.fail("tools/call at "+modernVersion, err)
		}
		r := runLoad(ctx, 1, b.duration, func(int) error { return callOnce(ctx, c, tool) })
		s[kModernCalls], s[kModernP50], s[cModern] = r.rate, r.p50, r.clientCPU
		errs += r.errors
		if r.errors > 0 {
			b.warn(fmt.Sprintf("%s: HTTP at %s: %d calls failed; the first: %v", m, modernVersion, r.errors, r.firstErr))
		}
	}
	s[kHTTPErrors] = float64(errs)
	return nil
}

// remoteBackend is a stdio agent with mcp-mux (mode m) whose backend is the
// fixture serving HTTP: tools/call p50 and calls/s with 1 caller, calls/s
// with 8 concurrent callers in the one session.
func (b *bench) remoteBackend(ctx context.Context, m mode, s sample) error {
	fx, err := b.startHTTP(ctx, direct)
	if err != nil {
		return err
	}
	defer fx.stop(5 * time.Second)
	seq := nextSeq()
	cfg := filepath.Join(b.dir, fmt.Sprintf("mux-remote-%d.toml", seq))
	if err := os.WriteFile(cfg, remoteConfig(httpFixture.name, fx.url), 0o600); err != nil {
		return fmt.Errorf("writing the mcp-mux config: %w", err)
	}
	bin := b.mux
	if m == before {
		bin = b.before
	}
	p, err := b.launch(m, fmt.Sprintf("remote-%s-%d", m, seq), []string{bin, "--config", cfg}, nil, "")
	if err != nil {
		return err
	}
	c, err := connect(ctx, p)
	if err != nil {
		p.stop(time.Second)
		return err
	}
	defer c.close()
	tool := toolName(m, httpFixture.name, "echo")
	if err := b.warmUp(ctx, c, p, tool); err != nil {
		return err
	}
	op := func(int) error { return callOnce(ctx, c, tool) }
	r1 := runLoad(ctx, 1, b.duration, op)
	r8 := runLoad(ctx, 8, b.duration, op)
	if err := ctx.Err(); err != nil {
		return err
	}
	s[kRemoteP50], s[kRemoteCalls1], s[kRemoteCalls8] = r1.p50, r1.rate, r8.rate
	s[cRemote1], s[cRemote8] = r1.clientCPU, r8.clientCPU
	s[kRemoteErrors] = float64(r1.errors + r8.errors)
	for _, r := range []loadResult{r1, r8} {
		if r.errors > 0 {
			b.warn(fmt.Sprintf("%s: remote backend: %d calls failed; the first: %v", m, r.errors, r.firstErr))
		}
	}
	return nil
}

// remoteConfig is a config with one remote backend, as a user would write
// it: defaults everywhere.
func remoteConfig(name, url string) []byte {
	return fmt.Appendf(nil, "[mux]\nstartup_timeout = \"30s\"\n\n[[backend]]\nname = %s\nurl = %s\n", tomlString(name), tomlString(url))
}

// idleSessions is the memory (VmRSS) of the serving process of mode m per
// idle session, each having listed resources and holding one
// resources/subscribe, at each of b.idleNs
// sessions: (RSS at N − RSS at 0) / N, 0 being after the warm-up session
// (N: the sessions that did open).
func (b *bench) idleSessions(ctx context.Context, m mode, s sample) error {
	p, _, stop, err := b.startWarmHTTP(ctx, m)
	if err != nil {
		return err
	}
	defer stop()
	pid := p.cmd.Process.Pid
	rss0, g0, countsGoroutines, err := b.idleBaseline(p, m)
	if err != nil {
		return err
	}
	s[kIdleRSS0] = float64(rss0)
	var open []*client
	defer func() { closeSessions(open) }()
	errs := 0
	for _, n := range b.idleNs {
		base := len(open)
		more, failed := b.openSessions(ctx, p, n-base, func(i int, c *client) error { return subscribeOne(ctx, c, base+i) })
		open = append(open, more...)
		errs += failed
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(b.settle)
		v, err := rss(pid)
		if err != nil {
			return fmt.Errorf("%s: reading its RSS: %w", m, err)
		}
		// Per session open: mcpmu refuses sessions past 256.
		s[kIdleOpen(n)] = float64(len(open))
		if len(open) > 0 {
			s[kIdleRSS(n)] = float64(v-rss0) / float64(len(open))
		}
		if b.quiet > 0 {
			// Idle for longer: past mcp-mux's keep-alive (5 s) and its
			// release of a quiet process's free heap (5 s without a GC).
			time.Sleep(b.quiet)
			if v, err = rss(pid); err != nil {
				return fmt.Errorf("%s: reading its RSS: %w", m, err)
			}
			if len(open) > 0 {
				s[kQuietRSS(n)] = float64(v-rss0) / float64(len(open))
			}
		}
		if g, ok := goroutines(p); ok && countsGoroutines && len(open) > 0 {
			s[kIdleGoroutines(n)] = float64(g-g0) / float64(len(open))
		}
		if b.keepDir {
			b.saveProfiles(p, fmt.Sprintf("idle-%s-%d", m, n))
		}
	}
	s[kIdleErrors] = float64(errs)
	return nil
}

// idleListens is what an idle agent of the current era costs the serving
// process of mode m: its subscriptions/listen streams are the era's only
// standing state, one for one of the fixture's resources and the one the
// go-sdk client opens itself for list changes. At each of b.idleNs agents,
// once every agent has had an update (the fixture's update tool, repeated
// until all have), the RSS per agent is read after b.settle and again
// after b.quiet, and (mcp-mux) the goroutines.
func (b *bench) idleListens(ctx context.Context, m mode, s sample) error {
	p, warm, stop, err := b.startWarmHTTP(ctx, m)
	if err != nil {
		return err
	}
	defer stop()
	lctx, stopListens := context.WithCancel(ctx)
	var open []*client
	var listening sync.WaitGroup
	defer func() {
		stopListens()
		listening.Wait()
		closeSessions(open)
	}()
	pid := p.cmd.Process.Pid
	rss0, g0, countsGoroutines, err := b.idleBaseline(p, m)
	if err != nil {
		return err
	}
	s[kListenRSS0] = float64(rss0)
	var failed atomic.Int64
	for _, n := range b.idleNs {
		base := len(open)
		for i := base; i < n; i++ {
			c, err := connectHTTPAt(ctx, p, modernVersion)
			if err != nil {
				return err
			}
			uri := fmt.Sprintf("fixture://%s/res/%d", httpFixture.name, i%100+1)
			c.updateURI.Store(&uri)
			open = append(open, c)
			listening.Go(func() {
				if err := c.cs.Subscribe(lctx, &mcp.SubscribeParams{URI: uri}); err != nil && lctx.Err() == nil {
					failed.Add(1)
				}
			})
		}
		// Every stream is open once it has had an update.
		// The fixture's update goes to its caller (mcp-mux fans it out);
		// serving HTTP itself, its publish goes to the subscribed.
		update := toolName(m, httpFixture.name, "update")
		if m == direct {
			update = "publish"
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			waiting := map[string]bool{}
			for _, c := range open {
				if c.updates.Load() == 0 {
					waiting[*c.updateURI.Load()] = true
				}
			}
			if len(waiting) == 0 {
				break
			}
			if time.Now().After(deadline) || failed.Load() > 0 {
				return fmt.Errorf("%s: %d of %d subscriptions/listen streams had no update after 60 s (%d failed), e.g. %s\n%s stderr (last lines):\n%s",
					m, len(waiting), len(open), failed.Load(), slices.Sorted(maps.Keys(waiting))[0], m, p.logTail(30))
			}
			for uri := range waiting {
				if _, err := warm.cs.CallTool(ctx, &mcp.CallToolParams{Name: update, Arguments: map[string]any{"uri": uri}}); err != nil {
					return warm.fail("tools/call "+update, err)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(b.settle)
		v, err := rss(pid)
		if err != nil {
			return fmt.Errorf("%s: reading its RSS: %w", m, err)
		}
		s[kListenRSS(n)] = float64(v-rss0) / float64(len(open))
		if b.quiet > 0 {
			time.Sleep(b.quiet)
			if v, err = rss(pid); err != nil {
				return fmt.Errorf("%s: reading its RSS: %w", m, err)
			}
			s[kListenQuiet(n)] = float64(v-rss0) / float64(len(open))
		}
		if g, ok := goroutines(p); ok && countsGoroutines {
			s[kListenGoroutines(n)] = float64(g-g0) / float64(len(open))
		}
	}
	s[kListenErrors] = float64(failed.Load())
	return nil
}

// subscribeOne lists resources (first page) and subscribes to the i-th
// listed, as an agent does (mcpmu knows a URI only after a list).
func subscribeOne(ctx context.Context, c *client, i int) error {
	ctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	res, err := c.cs.ListResources(ctx, &mcp.ListResourcesParams{})
	if err != nil {
		return fmt.Errorf("resources/list: %w", err)
	}
	if len(res.Resources) == 0 {
		return errors.New("resources/list: no resources")
	}
	uri := res.Resources[i%len(res.Resources)].URI
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		return fmt.Errorf("resources/subscribe %s: %w", uri, err)
	}
	return nil
}

// raiseOpenFiles makes room for the idle sessions' connections (two per
// session: the POSTs' and the standalone SSE stream's).
func (b *bench) raiseOpenFiles() error {
	need := uint64(4*slices.Max(b.idleNs) + 1024)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		return fmt.Errorf("%d idle sessions need about %d open files; the hard limit is %d (ulimit -Hn)", slices.Max(b.idleNs), need, lim.Max)
	}
	lim.Cur = lim.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// saveProfiles keeps p's heap and goroutine profiles in the kept
// directory as NAME.heap, NAME.goroutine and NAME.heap.txt (with
// runtime.MemStats), if it serves net/http/pprof:
// where an idle session's memory goes (go tool pprof -sample_index=inuse_space).
func (b *bench) saveProfiles(p *proc, name string) {
	addr := pprofAddr(p)
	if addr == "" {
		return
	}
	for _, prof := range []string{"heap", "goroutine", "heap?debug=1"} {
		resp, err := http.Get("http://" + addr + "/debug/pprof/" + prof)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s profile of %s: %v\n", prof, name, err)
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			// heap?debug=1 ends with runtime.MemStats: the stacks' share.
			err = os.WriteFile(filepath.Join(b.dir, name+"."+strings.ReplaceAll(prof, "?debug=1", ".txt")), data, 0o600)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s profile of %s: %v\n", prof, name, err)
		}
	}
}

// pprofAddr is the address p serves net/http/pprof on (mcp-mux with
// MCP_MUX_PPROF), or "".
func pprofAddr(p *proc) string {
	for _, kv := range p.cmd.Env {
		if v, ok := strings.CutPrefix(kv, "MCP_MUX_PPROF="); ok {
			return v
		}
	}
	return ""
}

// goroutines is the number of goroutines in p, if it serves net/http/pprof
// (mcp-mux with MCP_MUX_PPROF): the first line of the goroutine profile,
// "goroutine profile: total N".
func goroutines(p *proc) (int, bool) {
	addr := pprofAddr(p)
	if addr == "" {
		return 0, false
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, false
	}
	var n int
	if _, err := fmt.Sscanf(line, "goroutine profile: total %d", &n); err != nil {
		return 0, false
	}
	return n, true
}
