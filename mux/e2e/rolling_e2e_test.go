package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A rolling restart and a kill -9 under load (README, "Several instances
// behind a load balancer"): three instances of one config behind haproxy
// with the README's config, and go-sdk clients of both eras calling a tool
// that takes 100-300 ms in a loop for the whole test.

// callBound is how long a call may take before the test calls it hung:
// the slowest tool call is 300 ms, and haproxy's retries of an instance
// that is gone take a few seconds at most.
const callBound = 10 * time.Second

// loadCall is the outcome of one call of the load.
type loadCall struct {
	era        string // "handshake" or "current"
	start, end time.Time
	err        error
}

// cause is why a call failed, in the words of the summary; "" if it did
// not.
func (c loadCall) cause() string {
	switch {
	case c.err == nil:
		return ""
	case errors.Is(c.err, mcp.ErrSessionMissing):
		return "404: its session's instance is gone (re-initialized)"
	case strings.Contains(c.err.Error(), "Service Unavailable"):
		return "503: refused by a draining instance"
	case strings.Contains(c.err.Error(), "Bad Gateway"):
		return "502: its instance died with it in flight"
	case errors.Is(c.err, context.DeadlineExceeded):
		return "hung past " + callBound.String()
	default:
		return "other: " + c.err.Error()
	}
}

// load is the clients' loops and what their calls did.
type load struct {
	url, token string

	mu      sync.Mutex
	calls   []loadCall
	reinits int // handshake-era sessions initialized again after a 404
	connErr []string

	stop chan struct{}
	wg   sync.WaitGroup
}

func (l *load) record(c loadCall) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

// connect opens a session of era through the balancer: nil once the load
// stops.
func (l *load) connect(era string, n int) *mcp.ClientSession {
	for {
		c := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("rolling-%s-%d", era, n), Version: "1"}, nil)
		tr := &mcp.StreamableClientTransport{Endpoint: l.url, HTTPClient: &http.Client{Transport: withBearer{l.token}}}
		var opts *mcp.ClientSessionOptions
		if era == "handshake" {
			opts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
		}
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		cs, err := c.Connect(ctx, tr, opts)
		cancel()
		if err == nil {
			return cs
		}
		l.mu.Lock()
		l.connErr = append(l.connErr, fmt.Sprintf("%s client %d: %v", era, n, err))
		l.mu.Unlock()
		select {
		case <-l.stop:
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// run is one client's loop: a call of 100-300 ms after another until the
// load stops; a handshake-era client whose session is gone (404,
// ErrSessionMissing) initializes a new one, as the README says it must.
func (l *load) run(era string, n int) {
	defer l.wg.Done()
	cs := l.connect(era, n)
	for cs != nil {
		select {
		case <-l.stop:
			cs.Close()
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		c := loadCall{era: era, start: time.Now()}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__sleep", Arguments: map[string]any{"ms": 100 + rand.IntN(200)}})
		cancel()
		c.end = time.Now()
		if err == nil && (res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "slept") {
			err = fmt.Errorf("the tool's answer: %+v", res.Content)
		}
		c.err = err
		l.record(c)
		if errors.Is(err, mcp.ErrSessionMissing) {
			cs.Close()
			l.mu.Lock()
			l.reinits++
			l.mu.Unlock()
			cs = l.connect(era, n)
		}
	}
}

// drainTiming is what the test saw of one instance's drain, from its
// SIGTERM.
type drainTiming struct {
	lastReady, notReady, closed, exited time.Duration
}

// TestRollingRestartAndKillBehindHAProxy: three instances behind haproxy
// (the README's config, a third server added), three go-sdk clients of
// each era calling all along. A rolling restart, SIGTERM one instance at a
// time, each started again at its address and taken back by haproxy
// before the next: no call fails (a handshake-era session whose instance
// is gone gets 404 once and initializes again, which is counted), and
// each instance's /readyz answers 503 before its listener closes. Then a
// kill -9 of one: the only calls that fail are those that were in flight
// when it died, each with an error within callBound of the kill, and
// every call made after it succeeds on the others.
func TestRollingRestartAndKillBehindHAProxy(t *testing.T) {
	bin := haproxyBin(t)
	began := time.Now()
	const token = "rolling-token"
	env := "MUX_TEST_TOKEN=" + token
	cfg := testkit.WriteConfig(t, "http_token = \"${MUX_TEST_TOKEN}\"\ndrain_timeout = \"10s\"", []string{"f", "-name", "f"})
	muxes := make([]*httpMux, 3)
	for i := range muxes {
		muxes[i] = startHTTPMux(t, cfg, env)
	}
	addr := func(m *httpMux) string { return strings.TrimSuffix(strings.TrimPrefix(m.url, "http://"), "/mcp") }
	for _, m := range muxes {
		waitReady(t, m)
	}
	lb := startHAProxy(t, bin, withThirdServer(t, readmeHAProxyConfig(t)), muxes)

	l := &load{url: lb.url, token: token, stop: make(chan struct{})}
	const perEra = 3
	for n := range perEra {
		l.wg.Add(2)
		go l.run("handshake", n)
		go l.run("current", n)
	}
	stopLoad := sync.OnceFunc(func() {
		close(l.stop)
		done := make(chan struct{})
		go func() { l.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * callBound):
			t.Errorf("the load's clients did not stop within %v", 2*callBound)
		}
	})
	t.Cleanup(stopLoad)
	// The load runs a while on all three first.
	testkit.Eventually(t, 10*time.Second, "the load to make calls", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.calls) >= 6*perEra
	})

	// The rolling restart.
	rollBegan := time.Now()
	timings := make([]drainTiming, len(muxes))
	for i, m := range muxes {
		// A call of its own in flight keeps each drain long enough to
		// watch readiness flip while the listener is still open.
		slept := sleepInFlight(t, connectModern(t, m.url, token, nil), 1500)

		stopWatch := make(chan struct{})
		rw := watchReady(strings.TrimSuffix(m.url, "/mcp"), stopWatch)
		select {
		case <-rw.ready:
		case <-time.After(5 * time.Second):
			t.Fatalf("instance %d: /readyz did not answer 200", i+1)
		}
		exited := make(chan time.Time, 1)
		go func() { m.cmd.Wait(); exited <- time.Now() }()
		signalled := time.Now()
		if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		var exit time.Time
		select {
		case exit = <-exited:
		case <-time.After(15 * time.Second):
			t.Fatalf("instance %d did not exit after draining\n%s", i+1, m.stderr)
		}
		select {
		case <-rw.done:
		case <-time.After(5 * time.Second):
			t.Fatalf("instance %d: its port still accepts connections after it exited", i+1)
		}
		close(stopWatch)
		if err := <-slept; err != nil {
			t.Errorf("instance %d: the call in flight at SIGTERM: %v", i+1, err)
		}
		since := func(at time.Time) time.Duration {
			if at.IsZero() {
				return -1
			}
			return at.Sub(signalled).Round(100 * time.Microsecond)
		}
		timings[i] = drainTiming{since(rw.lastReady), since(rw.notReady), since(rw.closed), since(exit)}
		if rw.notReady.IsZero() || rw.closed.IsZero() || !rw.notReady.Before(rw.closed) || rw.lastReady.After(rw.notReady) {
			t.Errorf("instance %d: readiness must fail before the listener closes: last 200 at %v, first 503 at %v, closed at %v",
				i+1, timings[i].lastReady, timings[i].notReady, timings[i].closed)
		}

		// Started again where haproxy expects it, and taken back.
		muxes[i] = startHTTPMuxAt(t, cfg, addr(m), env)
		waitReady(t, muxes[i])
		pid := statsOf(t, connectModern(t, muxes[i].url, token, nil)).PID
		via := connectModern(t, lb.url, token, nil)
		testkit.Eventually(t, 15*time.Second, fmt.Sprintf("haproxy to send requests to instance %d again", i+1), func() bool {
			return statsOf(t, via).PID == pid
		})
	}
	rollEnded := time.Now()

	// kill -9 of one, under the same load.
	victim := muxes[1]
	killed := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// It is dead once reaped: a call begun between the signal and then
	// may have reached it still.
	victim.cmd.Wait()
	died := time.Now()
	// The load goes on on the others: long enough for haproxy's check to
	// take it out (3 checks 2 s apart) and for calls after that.
	testkit.Eventually(t, 15*time.Second, "haproxy's check to take the killed instance out", func() bool {
		return strings.Contains(lb.stderr.String(), "mcp_mux/mux2 is DOWN")
	})
	down := time.Now()
	testkit.Eventually(t, 10*time.Second, "calls made after haproxy took it out", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, c := range l.calls {
			if c.start.After(down) {
				n++
			}
		}
		return n >= 4*perEra
	})
	stopLoad()

	// The verdict.
	l.mu.Lock()
	defer l.mu.Unlock()
	type tally struct{ calls, ok int }
	eras := map[string]*tally{"handshake": {}, "current": {}}
	causes := map[string]int{}
	var longest, failedAfterKill time.Duration
	var inFlightAtKill int
	var missing string // how the go-sdk client says a session is gone
	for _, c := range l.calls {
		eras[c.era].calls++
		longest = max(longest, c.end.Sub(c.start))
		phase := "before the restart"
		switch {
		case c.start.After(died):
			phase = "after the kill"
		case c.end.After(killed):
			phase = "in flight at the kill"
		case c.start.After(rollEnded):
			phase = "before the kill"
		case c.start.After(rollBegan):
			phase = "during the rolling restart"
		}
		if phase == "in flight at the kill" {
			inFlightAtKill++
		}
		if c.err == nil {
			eras[c.era].ok++
		} else {
			causes[c.era+" era, "+phase+": "+c.cause()]++
			if c.end.After(killed) {
				failedAfterKill = max(failedAfterKill, c.end.Sub(killed))
			}
			if errors.Is(c.err, mcp.ErrSessionMissing) {
				missing = c.err.Error()
			}
		}
		switch {
		case c.err == nil, errors.Is(c.err, mcp.ErrSessionMissing) && c.era == "handshake":
			// A session that outlived its instance: expected, counted.
		case phase == "in flight at the kill" && c.end.Sub(killed) < callBound && !strings.HasPrefix(c.cause(), "hung"):
			// In flight on the killed instance: it may fail, with an error.
		default:
			t.Errorf("a %s-era call %s (began %v into the test, %v after the kill, took %v) failed: %s",
				c.era, phase, c.start.Sub(began).Round(time.Millisecond), c.start.Sub(died), c.end.Sub(c.start).Round(time.Millisecond), c.err)
		}
	}
	if len(l.connErr) > 0 {
		t.Errorf("initialize failed %d times: %s", len(l.connErr), strings.Join(l.connErr, "\n"))
	}
	causeLines := []string{"none"}
	if len(causes) > 0 {
		causeLines = causeLines[:0]
	}
	for cause, n := range causes {
		causeLines = append(causeLines, fmt.Sprintf("%d × %s", n, cause))
	}
	sort.Strings(causeLines)
	t.Logf("calls: handshake era %d (%d ok), current era %d (%d ok); longest %v; re-initializations after a 404: %d",
		eras["handshake"].calls, eras["handshake"].ok, eras["current"].calls, eras["current"].ok, longest.Round(time.Millisecond), l.reinits)
	t.Logf("failures by cause:\n\t%s", strings.Join(causeLines, "\n\t"))
	t.Logf("kill -9: reaped %v after the signal; %d calls in flight; the last failed call ended %v after the kill (bound %v)",
		died.Sub(killed).Round(100*time.Microsecond), inFlightAtKill, failedAfterKill.Round(time.Millisecond), callBound)
	if missing != "" {
		t.Logf("a session whose instance is gone, as the go-sdk client says it (ErrSessionMissing): %s", missing)
	}
	for i, d := range timings {
		t.Logf("instance %d drain, from SIGTERM: last /readyz 200 %v, first 503 %v, port refused %v, exited %v", i+1, d.lastReady, d.notReady, d.closed, d.exited)
	}
	t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
	for era, n := range eras {
		if n.ok == 0 {
			t.Errorf("no %s-era call succeeded", era)
		}
	}
}

// waitReady waits for m's /readyz to answer 200.
func waitReady(t *testing.T, m *httpMux) {
	t.Helper()
	base := strings.TrimSuffix(m.url, "/mcp")
	testkit.Eventually(t, 10*time.Second, base+"/readyz to answer 200", func() bool {
		code, _ := probe(t, base+"/readyz")
		return code == http.StatusOK
	})
}

// withThirdServer is conf, the README's haproxy config of two instances,
// with a third server line like its last.
func withThirdServer(t *testing.T, conf string) string {
	t.Helper()
	lines := serverLineRe.FindAllString(conf, -1)
	if len(lines) != 2 {
		t.Fatalf("the README's haproxy config has %d server lines, want 2:\n%s", len(lines), conf)
	}
	last := lines[len(lines)-1]
	third := strings.Replace(last, "mux2", "mux3", 1)
	return strings.Replace(conf, last, last+"\n"+third, 1)
}

var serverLineRe = regexp.MustCompile(`(?m)^\s*server\s+mux\d.*$`)
