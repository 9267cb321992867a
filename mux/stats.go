package mux

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/mcp-mux/mcp-mux/mux/control"
)

// What `mcp-mux status` shows of each backend's use: the requests
// forwarded to it, those that ended in an error, and the latency of the
// recent ones. forward observes every request it runs, whichever door it
// came by.

// latencyWindow is how many recent durations a backend keeps for its
// percentiles: memory stays bounded however long mcp-mux serves.
const latencyWindow = 512

// processStart is when this process started, for the status's uptime.
var processStart = time.Now()

// callStats is the counters of every backend, by name: a reload that
// replaces a backend keeps its counts. The zero value is ready.
type callStats struct {
	mu     sync.Mutex
	byName map[string]*backendCalls
}

// backendCalls is one backend's counters; recent is a ring of the last
// latencyWindow durations, next its write position.
type backendCalls struct {
	calls, errors int64
	recent        []time.Duration
	next          int
}

// observe counts one request to backend that started at start and ended
// with *err. It is deferred by forward with its named error result.
func (cs *callStats) observe(backend string, start time.Time, err *error) {
	d := time.Since(start)
	failed := err != nil && *err != nil
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byName == nil {
		cs.byName = map[string]*backendCalls{}
	}
	bc := cs.byName[backend]
	if bc == nil {
		bc = &backendCalls{}
		cs.byName[backend] = bc
	}
	bc.calls++
	if failed {
		bc.errors++
	}
	if len(bc.recent) < latencyWindow {
		bc.recent = append(bc.recent, d)
	} else {
		bc.recent[bc.next] = d
		bc.next = (bc.next + 1) % latencyWindow
	}
}

// callSnapshot is one backend's counters at one moment.
type callSnapshot struct {
	calls, errors int64
	p50, p95      time.Duration
}

// snapshot copies backend's counters under the lock and sorts the copy
// outside it.
func (cs *callStats) snapshot(backend string) callSnapshot {
	cs.mu.Lock()
	bc := cs.byName[backend]
	if bc == nil {
		cs.mu.Unlock()
		return callSnapshot{}
	}
	s := callSnapshot{calls: bc.calls, errors: bc.errors}
	recent := slices.Clone(bc.recent)
	cs.mu.Unlock()
	slices.Sort(recent)
	s.p50, s.p95 = percentile(recent, 50), percentile(recent, 95)
	return s
}

// percentile is the nearest-rank p-th percentile of sorted, 0 if empty.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 × n), 1-based
	return sorted[max(rank, 1)-1]
}

// configPath is path absolute, as a user in another directory finds it.
func configPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// StatusDocument is what this mcp-mux answers `mcp-mux status` with: its
// process, sessions and backends as mcp-mux://backends reports them, with
// each backend's counters. Each part is read under its own lock briefly;
// no backend is asked anything.
func (m *Mux) StatusDocument() control.Document {
	doc := control.Document{
		Version:  control.Version,
		PID:      os.Getpid(),
		Config:   configPath(m.cfg.Path),
		Started:  processStart,
		Uptime:   time.Since(processStart).Round(time.Second).Seconds(),
		Threads:  runtime.GOMAXPROCS(0),
		Sessions: []control.Session{},
		Backends: []control.Backend{},
	}
	for _, s := range m.Sessions() {
		doc.Sessions = append(doc.Sessions, control.Session{ID: s.ID, Client: s.Client, Protocol: s.Protocol, PID: s.PID, Profile: s.Profile, Backends: s.Backends, Token: s.Token})
	}
	for _, st := range m.Status() {
		c := m.stats.snapshot(st.Name)
		state := st.State
		if st.SignIn == stateNeedsLogin {
			state = stateNeedsLogin
		}
		doc.Backends = append(doc.Backends, control.Backend{
			Name: st.Name, State: state, Since: st.Since, PID: st.PID, Restarts: st.Restarts, LastError: st.LastError,
			Calls: c.calls, Errors: c.errors, P50: control.Millis(c.p50), P95: control.Millis(c.p95),
		})
	}
	return doc
}
