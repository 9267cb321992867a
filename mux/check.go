package mux

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/mcp-mux/mcp-mux/backends"
)

// Report is what `mcp-mux check --connect` found: each backend started,
// initialized and listed, and every name or URI two backends both offer.
type Report struct {
	Config     string          `json:"config"`
	OK         bool            `json:"ok"`
	Backends   []BackendStatus `json:"backends"`
	Collisions []Collision     `json:"collisions"`
	// Interrupted: ctx ended (Ctrl-C) before every backend had started;
	// the report is what was known then.
	Interrupted bool `json:"interrupted,omitempty"`
}

// interruptGrace replaces shutdown_grace when a check is interrupted: the
// user asked for it to end now, and a backend that ignores stdin EOF must
// not hold it for shutdown_grace. It is enough for a backend that exits on
// EOF to do so cleanly; the rest get SIGTERM, then SIGKILL.
const interruptGrace = 100 * time.Millisecond

// errInterrupted is the Err of a backend killed because the check was
// interrupted while it was being stopped.
var errInterrupted = errors.New("check interrupted while stopping")

// Inspect starts every enabled backend of cfg, waits for each to be ready
// or to fail, takes the report, and stops them all. If ctx ends first, or
// while they are being stopped, they are stopped at once (see stopAll) and
// the report has Interrupted set.
func Inspect(ctx context.Context, cfg *Config, logger *log.Logger, version string) *Report {
	m := New(cfg, logger, version)
	defer m.Close()
	m.agent.wait = -1 // no agent: backends are told no client capabilities
	m.Start()
	m.waitStarted(ctx)
	r := &Report{Config: cfg.Path, OK: true, Backends: m.Status(), Collisions: m.Collisions()}
	for _, b := range r.Backends {
		if !b.Ready() {
			r.OK = false
		}
	}
	m.stopAll(ctx)
	if ctx.Err() != nil {
		r.OK, r.Interrupted = false, true
	}
	return r
}

// stopAll stops every backend, for Close to find them stopped already: with
// shutdown_grace, or interruptGrace if ctx has ended; if ctx ends while
// they take their grace, what is left is killed. The ready ones are stopped
// at once, while the run loops end: cancelling mux's context cancels the
// starts in progress (their processes are killed). Once every loop has
// returned, no backend can become ready any more, and one that did
// meanwhile is stopped too.
func (m *Mux) stopAll(ctx context.Context) {
	grace := m.cfg.Mux.ShutdownGrace.Duration
	interrupted := ctx.Err() != nil
	if interrupted {
		grace = min(grace, interruptGrace)
	}
	var wg sync.WaitGroup
	var stopping []*backends.Backend
	stopEach := func() {
		for _, mem := range m.members {
			mem.mu.Lock()
			b := mem.b
			mem.mu.Unlock()
			if b != nil && !slices.Contains(stopping, b) {
				stopping = append(stopping, b)
				wg.Add(1)
				go func() {
					defer wg.Done()
					b.Stop(grace)
				}()
			}
		}
	}
	m.cancel()
	stopEach()
	m.wg.Wait()
	stopEach()
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(stopped)
	}()
	if !interrupted {
		select {
		case <-stopped:
		case <-ctx.Done():
			for _, b := range stopping {
				select {
				case <-b.Done():
				default:
					b.Kill(errInterrupted)
				}
			}
		}
	}
	<-stopped
}

// Collisions lists every tool or prompt name and resource URI offered by
// more than one backend, with the winner (first in config order).
func (m *Mux) Collisions() []Collision {
	out := append([]Collision{}, m.cat.get().collisions...)
	rc := m.resourceCollisions()
	slices.SortFunc(rc, func(a, b Collision) int { return cmp.Compare(a.Name, b.Name) })
	return append(out, rc...)
}
