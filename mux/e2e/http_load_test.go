package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The bounded load test of `serve --http`: 20 agents at once doing reads
// and calls for 20 s on two backends, one of which is killed midway and
// comes back. Every request is answered, no session sees what another
// asked for, and mcp-mux gives back what the sessions cost once they left.

const (
	loadSessions = 20
	loadFor      = 20 * time.Second
	loadKillAt   = 8 * time.Second
	// A request answered later than this counts as not answered.
	loadRequestLimit = 15 * time.Second
	// What mcp-mux may keep after every session left, over what it had
	// before they came: the Go runtime gives freed heap back to the OS
	// gradually and keeps some, so RSS is compared with a margin, while
	// sessions and goroutines (exact counts) must come back to the same.
	loadRSSMargin       = 16 << 20
	loadGoroutineMargin = 4
)

// loadAgent is one agent of the load test and what it saw.
type loadAgent struct {
	i    int
	cs   *mcp.ClientSession
	subs map[string]bool // the URIs it subscribed to
	home string          // the backend its own URI is on

	mu       sync.Mutex
	updates  map[string]int
	progress int
	foreign  []string // what it got that was not its own
}

// loadStats adds up what all agents did.
type loadStats struct {
	mu        sync.Mutex
	latencies map[string][]time.Duration // per kind of request
	errors    map[string]int             // JSON-RPC errors (or error results), per backend
	failures  []string                   // requests not answered: the test fails
}

func (st *loadStats) record(kind, backend string, took time.Duration, err error, isError bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.latencies[kind] = append(st.latencies[kind], took)
	var je *jsonrpc.Error
	switch {
	case err == nil && !isError:
	case err == nil || errors.As(err, &je):
		st.errors[backend]++
	default:
		st.failures = append(st.failures, fmt.Sprintf("%s on %s after %v: %v", kind, backend, took.Round(time.Millisecond), err))
	}
}

// muxStatus is what the test reads of mcp-mux://backends.
type muxStatus struct {
	Backends []struct {
		Name     string `json:"name"`
		State    string `json:"state"`
		PID      int    `json:"pid"`
		Restarts int    `json:"restarts"`
	} `json:"backends"`
	Sessions   []json.RawMessage `json:"sessions"`
	Goroutines int               `json:"goroutines"`
}

func readMuxStatus(t *testing.T, cs *mcp.ClientSession) muxStatus {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
	if err != nil {
		t.Fatal(err)
	}
	var st muxStatus
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestHTTPLoadTwentySessionsWhileABackendIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("a 25 s load test")
	}
	h := startHTTPMux(t, testkit.WriteConfig(t, "", []string{"f", "-name", "f", "-resources", "30"}, []string{"g", "-name", "g", "-resources", "30"}))
	pid := h.cmd.Process.Pid
	// The agents' connections are the test's own, to close at the end.
	tr := &http.Transport{MaxIdleConnsPerHost: loadSessions}
	defer tr.CloseIdleConnections()
	connect := func(name string, opts *mcp.ClientOptions) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: tr}},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connect: %v\nstderr:\n%s", err, h.stderr)
		}
		return cs
	}

	// The baseline: both backends up, one session (the probe) in.
	probe := connect("probe", nil)
	defer probe.Close()
	if _, err := probe.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	base := readMuxStatus(t, probe)
	baseRSS := vmRSS(pid)

	agents := make([]*loadAgent, loadSessions)
	for i := range agents {
		a := &loadAgent{i: i, subs: map[string]bool{}, updates: map[string]int{}, home: []string{"f", "g"}[i%2]}
		a.cs = connect(fmt.Sprintf("load-%d", i), &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
				a.mu.Lock()
				defer a.mu.Unlock()
				a.updates[r.Params.URI]++
				if !a.subs[r.Params.URI] {
					a.foreign = append(a.foreign, "update for "+r.Params.URI)
				}
			},
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				a.mu.Lock()
				defer a.mu.Unlock()
				a.progress++
				if tok, _ := r.Params.ProgressToken.(string); !strings.HasPrefix(tok, fmt.Sprintf("a%d-", i)) {
					a.foreign = append(a.foreign, fmt.Sprintf("progress for token %v", r.Params.ProgressToken))
				}
			},
		})
		uris := []string{a.ownURI()}
		if i%4 < 2 { // half share one URI of each backend as well
			uris = append(uris, fmt.Sprintf("fixture://%s/res/30", a.home))
		}
		for _, u := range uris {
			a.mu.Lock()
			a.subs[u] = true
			a.mu.Unlock()
			if err := a.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: u}); err != nil {
				t.Fatalf("agent %d subscribe %s: %v", i, u, err)
			}
		}
		agents[i] = a
	}

	st := &loadStats{latencies: map[string][]time.Duration{}, errors: map[string]int{}}
	start := time.Now()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.run(st, start.Add(loadFor))
		}()
	}

	// Midway, the backend g is killed; mcp-mux restarts it.
	var peakRSS atomic.Int64
	peakRSS.Store(baseRSS)
	sample := func() {
		if r := vmRSS(pid); r > peakRSS.Load() {
			peakRSS.Store(r)
		}
	}
	var killedPID int
	var backAfter time.Duration
	// The sleeps below pace the RSS samples and the status reads over the
	// load's fixed 20 s; none waits for an event in place of checking it:
	// the restart is seen in the status (or reported missing), and the
	// settling after is a condition with a deadline.
	for time.Since(start) < loadKillAt {
		sample()
		time.Sleep(200 * time.Millisecond) // pacing: an RSS sample every 200 ms
	}
	for _, b := range readMuxStatus(t, probe).Backends {
		if b.Name == "g" {
			killedPID = b.PID
		}
	}
	p, err := os.FindProcess(killedPID)
	if killedPID == 0 || err != nil {
		t.Fatalf("no pid for backend g: %v", err)
	}
	p.Kill()
	killed := time.Now()
	for backAfter == 0 && time.Since(start) < loadFor {
		sample()
		for _, b := range readMuxStatus(t, probe).Backends {
			if b.Name == "g" && b.State == "ready" && b.PID != killedPID && b.PID != 0 {
				backAfter = time.Since(killed)
			}
		}
		time.Sleep(50 * time.Millisecond) // pacing: the restart time, to 50 ms
	}
	for time.Since(start) < loadFor {
		sample()
		time.Sleep(200 * time.Millisecond) // pacing: an RSS sample every 200 ms
	}
	wg.Wait()
	sample()
	if backAfter == 0 {
		t.Errorf("backend g was not back %v after it was killed", time.Since(killed).Round(time.Millisecond))
	}

	// Every request answered; nothing of another session's seen.
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, f := range st.failures {
		t.Errorf("not answered: %s", f)
	}
	if n := st.errors["f"]; n > 0 {
		t.Errorf("%d requests to backend f, which was never down, failed", n)
	}
	updates, progress := 0, 0
	for _, a := range agents {
		a.mu.Lock()
		for _, f := range a.foreign {
			t.Errorf("agent %d got %s, not its own", a.i, f)
		}
		for _, n := range a.updates {
			updates += n
		}
		progress += a.progress
		if a.updates[a.ownURI()] == 0 {
			t.Errorf("agent %d got no update for its own URI", a.i)
		}
		a.mu.Unlock()
	}

	// All leave: mcp-mux gives back what they cost.
	for _, a := range agents {
		a.cs.Close()
	}
	tr.CloseIdleConnections()
	var final muxStatus
	var finalRSS int64
	deadline := time.Now().Add(15 * time.Second)
	for {
		final, finalRSS = readMuxStatus(t, probe), vmRSS(pid)
		settled := len(final.Sessions) == len(base.Sessions) && final.Goroutines <= base.Goroutines+loadGoroutineMargin &&
			(baseRSS < 0 || finalRSS <= baseRSS+loadRSSMargin)
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // a poll of a condition with a deadline (15 s), checked below

	}

	total := 0
	for _, kind := range slices.Sorted(maps.Keys(st.latencies)) {
		l := st.latencies[kind]
		total += len(l)
		slices.Sort(l)
		t.Logf("%-8s %6d requests, p50 %v, p99 %v, max %v", kind, len(l),
			l[len(l)/2].Round(time.Microsecond*100), l[len(l)*99/100].Round(time.Microsecond*100), l[len(l)-1].Round(time.Millisecond))
	}
	t.Logf("%d sessions, %v: %d requests (%.0f/s), JSON-RPC errors: f %d, g %d (killed at %v, back after %v); not answered: %d",
		loadSessions, loadFor, total, float64(total)/loadFor.Seconds(), st.errors["f"], st.errors["g"], loadKillAt, backAfter.Round(time.Millisecond), len(st.failures))
	t.Logf("notifications received: %d resources/updated, %d progress; none foreign", updates, progress)
	t.Logf("mcp-mux RSS: baseline %.1f MiB, peak %.1f MiB, after all left %.1f MiB; sessions %d → %d; goroutines %d → %d",
		mib(baseRSS), mib(peakRSS.Load()), mib(finalRSS), len(base.Sessions), len(final.Sessions), base.Goroutines, final.Goroutines)

	if len(final.Sessions) != len(base.Sessions) {
		t.Errorf("%d sessions left after all agents closed theirs, want %d", len(final.Sessions), len(base.Sessions))
	}
	if final.Goroutines > base.Goroutines+loadGoroutineMargin {
		t.Errorf("mcp-mux runs %d goroutines after the agents left, %d before they came", final.Goroutines, base.Goroutines)
	}
	if baseRSS >= 0 && finalRSS > baseRSS+loadRSSMargin {
		t.Errorf("mcp-mux's RSS is %.1f MiB after the agents left, %.1f MiB before they came (margin %d MiB)", mib(finalRSS), mib(baseRSS), loadRSSMargin>>20)
	}
	if total < loadSessions*10 {
		t.Errorf("only %d requests in %v", total, loadFor)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// ownURI is the resource only this agent subscribes to.
func (a *loadAgent) ownURI() string { return fmt.Sprintf("fixture://%s/res/%d", a.home, a.i+1) }

// run does requests until the deadline: a read of its own resource, a call
// that updates it (and now and then the shared one), and a call with a
// progress token, each on its home backend.
func (a *loadAgent) run(st *loadStats, until time.Time) {
	for n := 0; time.Now().Before(until); n++ {
		do := func(kind string, f func(context.Context) (bool, error)) {
			ctx, cancel := context.WithTimeout(context.Background(), loadRequestLimit)
			defer cancel()
			start := time.Now()
			isError, err := f(ctx)
			st.record(kind, a.home, time.Since(start), err, isError)
		}
		do("read", func(ctx context.Context) (bool, error) {
			_, err := a.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: a.ownURI()})
			return false, err
		})
		uri := a.ownURI()
		if n%5 == 0 {
			uri = fmt.Sprintf("fixture://%s/res/30", a.home)
		}
		do("update", func(ctx context.Context) (bool, error) {
			res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: a.home + "__update", Arguments: map[string]any{"uri": uri}})
			return res != nil && res.IsError, err
		})
		do("progress", func(ctx context.Context) (bool, error) {
			res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: a.home + "__progress", Arguments: map[string]any{"steps": 2},
				Meta: mcp.Meta{"progressToken": fmt.Sprintf("a%d-%d", a.i, n)}})
			return res != nil && res.IsError, err
		})
	}
}
