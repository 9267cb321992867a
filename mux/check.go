package mux

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// Report is what `mcp-mux check --connect` found: each backend started,
// initialized and listed, and every name or URI two backends both offer.
type Report struct {
	Config     string          `json:"config"`
	OK         bool            `json:"ok"`
	Backends   []BackendStatus `json:"backends"`
	Collisions []Collision     `json:"collisions"`
	// Warnings: filter patterns that match nothing a ready backend lists,
	// and exposed names too long for some agents (filters.go).
	Warnings []string `json:"warnings"`
	// Interrupted: ctx ended (Ctrl-C) before every backend had started;
	// the report is what was known then.
	Interrupted bool `json:"interrupted,omitempty"`
	// Hidden: tools that point at a resource (_meta.ui.resourceUri) another
	// backend's collision hides, so the agent would show the other's app.
	// A check with any is not OK.
	Hidden []string `json:"hidden,omitempty"`
	// Offered is, per backend in config order, the tool and prompt names
	// the agent sees.
	Offered []Offered `json:"offered,omitempty"`
	// Problems are the config's mistakes (config.File.Problems): the
	// backends they leave able to start were started, and a check with
	// any is not OK.
	Problems []config.Problem `json:"problems,omitempty"`
}

// Offered is what one backend adds to the agent's lists: its tools and
// prompts under the names the agent calls them (prefixed), without those
// another backend took first.
type Offered struct {
	Backend string   `json:"backend"`
	Tools   []string `json:"tools"`
	Prompts []string `json:"prompts"`
}

// InspectOption tunes Inspect.
type InspectOption func(*inspectOptions)

type inspectOptions struct {
	settled func(BackendStatus)
}

// OnSettled has Inspect call f with each backend's status as soon as its
// start has settled (ready or failed), in the order they settle. The calls
// come one at a time from Inspect's goroutine, so f may write to a
// terminal without locking; none comes for a backend still starting when
// ctx ends.
func OnSettled(f func(BackendStatus)) InspectOption {
	return func(o *inspectOptions) { o.settled = f }
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
func Inspect(ctx context.Context, cfg *config.File, logger *log.Logger, version string, opts ...InspectOption) *Report {
	var o inspectOptions
	for _, opt := range opts {
		opt(&o)
	}
	m := New(withoutRestarts(cfg), logger, version)
	defer m.Close()
	m.agent.wait = -1 // no agent: backends are told no client capabilities
	m.Start()
	m.waitSettled(ctx, o.settled)
	r := &Report{Config: cfg.Path, OK: true, Backends: m.Status(), Collisions: m.Collisions(), Warnings: m.checkWarnings(), Offered: m.offered(), Hidden: m.hiddenToolResources(), Problems: cfg.Problems}
	for _, b := range r.Backends {
		if !b.Ready() {
			r.OK = false
		}
	}
	if len(r.Hidden) > 0 || len(r.Problems) > 0 {
		r.OK = false
	}
	m.stopAll(ctx)
	if ctx.Err() != nil {
		r.OK, r.Interrupted = false, true
	}
	return r
}

// CatalogWarnings is what check can say without starting anything, from
// the catalogs remembered (lazy.go): the filter patterns of cfg that match
// none of a remembered backend's names, and the names too long for some
// agents, as Inspect's Warnings. A backend never seen has nothing said of
// it.
func CatalogWarnings(cfg *config.File) []string {
	cp := *cfg
	cp.Mux.AuditLog = "" // nothing is called
	m := New(&cp, log.New(io.Discard), "")
	defer m.Close()
	m.restRemembered(m.members())
	return m.checkWarnings()
}

// withoutRestarts is cfg with every backend's restart = "never": a check
// reports each backend's first start, so one that fails is failed, with
// the cause of that failure (not "restarting", nor the cause of a restart
// that happened while slower backends were starting). Every backend starts
// at once and stays up (start = "eager", no idle_stop): a check starts
// each, and so refreshes what is remembered of it (lazy.go).
func withoutRestarts(cfg *config.File) *config.File {
	cp := *cfg
	cp.Backends = slices.Clone(cfg.Backends)
	cp.Mux.Start, cp.Mux.IdleStop = config.StartEager, config.Duration{}
	for i := range cp.Backends {
		cp.Backends[i].Restart = config.RestartNever
		cp.Backends[i].Start, cp.Backends[i].IdleStop = "", config.Duration{}
	}
	return &cp
}

// waitSettled waits until every backend's first start has settled (or ctx
// ends), calling settled, if set, with each one's status as it does.
func (m *Mux) waitSettled(ctx context.Context, settled func(BackendStatus)) {
	members := m.members()
	done := make(chan *member, len(members))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, mem := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-mem.started:
				done <- mem
			case <-stop:
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for range members {
		select {
		case mem := <-done:
			if settled != nil {
				settled(mem.status())
			}
		case <-ctx.Done():
			return
		case <-m.ctx.Done():
			return
		}
	}
}

// offered lists, per backend in config order, the tool and prompt names
// of the merged catalog.
func (m *Mux) offered() []Offered {
	members := m.members()
	out := make([]Offered, len(members))
	at := make(map[*member]int, len(members))
	for i, mem := range members {
		at[mem] = i
		out[i] = Offered{Backend: mem.spec.Name, Tools: []string{}, Prompts: []string{}}
	}
	c := m.cat.get()
	for _, e := range c.tools.items {
		if i, ok := at[e.mem]; ok {
			out[i].Tools = append(out[i].Tools, e.item.Name)
		}
	}
	for _, e := range c.prompts.items {
		if i, ok := at[e.mem]; ok {
			out[i].Prompts = append(out[i].Prompts, e.item.Name)
		}
	}
	return out
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
		for _, mem := range m.members() {
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

// hiddenToolResources lists each tool whose resource (_meta.ui.resourceUri,
// as the agent sees it) a read would take to another backend than the
// tool's own.
func (m *Mux) hiddenToolResources() []string {
	var out []string
	for _, e := range m.cat.get().tools.items {
		uri := toolUIResource(e.raw)
		if uri == "" {
			continue
		}
		if owner, _, ok := m.route(nil, uri); ok && owner != e.mem {
			out = append(out, fmt.Sprintf("tool %s (backend %s) points at %s, which backend %s serves: the agent would show %s's", e.item.Name, e.mem.spec.Name, uri, owner.spec.Name, owner.spec.Name))
		}
	}
	return out
}
