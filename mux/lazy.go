package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/catalogmem"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// Start when used. What each backend offered is remembered from one run to
// the next (mux/catalogmem), so its part of the catalog is known before it
// runs: the agent's first list is the whole list at once, and a backend the
// agent never uses never starts. A request that routes to a backend not
// running (a call, get, read, complete or subscribe) starts it and waits
// for it; idle_stop stops one that had nothing to do for that long, and its
// catalog stays listed. When a backend starts and lists something other
// than what was remembered, the agent is told its lists changed.

const (
	// stateRemembered: its catalog is known from an earlier run; it has
	// not started.
	stateRemembered = "remembered"
	// stateIdle: stopped after idle_stop without use; its catalog stays.
	stateIdle = "idle"
)

// maxRememberedResources bounds the resources remembered of one backend;
// one that lists more starts at once, every time, to list them live.
const maxRememberedResources = 2000

// CatalogsEnv names the directory the catalogs are remembered in (a file
// per backend), instead of the one in the user's cache directory; "off"
// remembers nothing from one run to the next (every backend starts at
// once, as with start = "eager").
const CatalogsEnv = "MCP_MUX_CATALOGS"

// openCatalogs is the memory of catalogs, or nil for none: CatalogsEnv
// is "off", or a value that is not usable, which err says.
func openCatalogs() (_ *catalogmem.Store, err error) {
	dir, err := catalogmem.DirFrom(os.Getenv(CatalogsEnv))
	if dir == "" {
		return nil, err
	}
	return catalogmem.Open(dir), nil
}

// CatalogsProblem is why CatalogsEnv's value is not used, nil if it is
// (or is "off"), for check to say.
func CatalogsProblem() error {
	_, err := openCatalogs()
	return err
}

// specNow is mem.spec, which a reload may be changing.
func (mem *member) specNow() config.Backend {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	return mem.spec
}

// startsWhenUsed reports whether mem waits for its first use: its start
// policy allows it and its catalog is remembered (loaded into mem then),
// for the capabilities mux declares to its backends if the agent's are
// known, else the catalog seen last (settleRest compares them once they
// are). One whose last start failed starts at once instead: listing from
// memory what may not start again would offer the agent tools that fail.
func (mem *member) startsWhenUsed() bool {
	spec := mem.specNow()
	if mem.m.catalogs == nil || spec.StartPolicy(mem.m.settings()) == config.StartEager {
		return false
	}
	ids := memoryIDs(spec, mem.m.runDir())
	var caps json.RawMessage
	if c, known := mem.m.agent.declaredShape(); known {
		caps = c
	}
	for i, id := range ids {
		e, ok := recall(mem.m.catalogs, []catalogmem.Identity{id}, caps)
		if !ok {
			if _, seen := recall(mem.m.catalogs, []catalogmem.Identity{id}, nil); seen && caps != nil {
				mem.log.Info("starting it at once: its catalog is remembered only for clients of other capabilities, which may change what it lists", "agent", string(caps))
				return false
			}
			continue
		}
		if e.Failure != nil {
			mem.log.Info("starting it at once, not when first used: its last start failed", "at", e.Failure.At, "reason", e.Failure.Reason)
			return false
		}
		mem.listFromMemory(e)
		if i > 0 {
			// Seen only in other directories: listed as it was there,
			// and started at once to learn what it lists in this one
			// (list_changed if that differs).
			mem.log.Info("starting it at once: its catalog is remembered from another directory only")
			return false
		}
		return true
	}
	return false
}

// listFromMemory makes e, remembered, mem's catalog and initialize result.
func (mem *member) listFromMemory(e catalogmem.Entry) {
	cat := mem.catalogOf(e)
	init := &mcp.InitializeResult{ProtocolVersion: e.ProtocolVersion, Instructions: e.Instructions}
	if len(e.ServerInfo) > 0 {
		json.Unmarshal(e.ServerInfo, &init.ServerInfo)
	}
	if len(e.Capabilities) > 0 {
		json.Unmarshal(e.Capabilities, &init.Capabilities)
	}
	if init.Capabilities == nil {
		init.Capabilities = &mcp.ServerCapabilities{}
	}
	mem.mu.Lock()
	mem.cat, mem.initResult, mem.known, mem.restCaps = cat, init, true, e.ClientCapabilities
	mem.remembered = compactSums(e.Tools, e.Prompts, e.Templates, e.Resources)
	mem.mu.Unlock()
}

// catalogOf is the member's catalog from what was remembered, as refresh
// would make it from the backend's lists.
func (mem *member) catalogOf(e catalogmem.Entry) memberCatalog {
	var c memberCatalog
	tools := decodeRaw(mem, e.Tools, "tool", func(t *mcp.Tool) bool { return mem.named("tool", t.Name) })
	prompts := decodeRaw(mem, e.Prompts, "prompt", func(p *mcp.Prompt) bool { return mem.named("prompt", p.Name) })
	tmpls := decodeRaw(mem, e.Templates, "resource template", mem.acceptTemplate)
	c.tools, c.raw[0], c.sums[0] = values(tools), raws(tools), fingerprintRaw(tools)
	c.prompts, c.raw[1], c.sums[1] = values(prompts), raws(prompts), fingerprintRaw(prompts)
	c.templates, c.raw[2], c.tmplSum = values(tmpls), raws(tmpls), fingerprintRaw(tmpls)
	for _, t := range c.templates {
		if ut, err := uritemplate.New(t.URITemplate); err == nil {
			c.compiled = append(c.compiled, compileTemplate(ut, t.URITemplate))
		}
	}
	c.uris = map[string]struct{}{}
	for _, r := range e.Resources {
		if uri, err := resourceURI(r); err == nil && uri != "" && !hasBuiltinScheme(uri) {
			c.uris[uri] = struct{}{}
			c.resources = append(c.resources, r)
		}
	}
	c.nres = len(c.uris)
	c.sums[2] = c.tmplSum ^ fingerprintKeys(c.uris)
	return c
}

// decodeRaw is raw items of a list decoded, as listRaw decodes a page.
func decodeRaw[T any](mem *member, raw []json.RawMessage, kind string, ok func(*T) bool) []rawItem[T] {
	out := make([]rawItem[T], 0, len(raw))
	for _, r := range raw {
		v := new(T)
		if json.Unmarshal(r, v) != nil || !ok(v) {
			mem.log.Warn("a remembered " + kind + " does not decode, left out")
			continue
		}
		out = append(out, rawItem[T]{v: v, raw: r})
	}
	return out
}

// compactSums fingerprints each kind of the lists (tools, prompts,
// templates with resources) over their compact JSON: what was remembered
// and what the backend lists now compare equal when only spacing differs.
func compactSums(tools, prompts, templates, resources []json.RawMessage) [3]uint64 {
	sum := func(lists ...[]json.RawMessage) uint64 {
		h := fnv.New64a()
		var b bytes.Buffer
		for _, l := range lists {
			for _, r := range l {
				b.Reset()
				if json.Compact(&b, r) != nil {
					b.Write(r)
				}
				h.Write(b.Bytes())
				h.Write([]byte{0})
			}
			h.Write([]byte{1})
		}
		return h.Sum64()
	}
	return [3]uint64{sum(tools), sum(prompts), sum(templates, resources)}
}

// remember stores what b offers now, for the next run to know before it
// starts b. A backend whose resources are too many to remember is
// forgotten: it starts at once, every time.
func (mem *member) remember(b *backends.Backend) (changed kinds) {
	cat := mem.snapshot()
	mem.mu.Lock()
	spec, before, known := mem.spec, mem.remembered, mem.known
	mem.mu.Unlock()
	e := catalogmem.Entry{Tools: cat.raw[0], Prompts: cat.raw[1], Templates: cat.raw[2], Resources: cat.resources,
		ClientCapabilities: catalogmem.Shape(b.ClientCapabilities())}
	if r := b.InitializeResult(); r != nil {
		e.ProtocolVersion, e.Instructions = r.ProtocolVersion, r.Instructions
		e.ServerInfo, _ = json.Marshal(r.ServerInfo)
		e.Capabilities, _ = json.Marshal(r.Capabilities)
	}
	now := compactSums(e.Tools, e.Prompts, e.Templates, e.Resources)
	for i, k := range []kinds{kindTools, kindPrompts, kindResources} {
		if known && now[i] != before[i] {
			changed |= k
		}
	}
	mem.mu.Lock()
	mem.remembered, mem.known = now, true
	mem.mu.Unlock()
	store := mem.m.catalogs
	if store == nil {
		return changed
	}
	// Apart: the backend's file is written and synced to disk, and the
	// backend is ready without it.
	ids := memoryIDs(spec, mem.m.runDir())
	mem.writeMemory(func() {
		for _, id := range ids {
			if cat.resourcesCut {
				if err := store.Forget(id); err != nil {
					mem.log.Warn("cannot update the remembered catalogs", "err", err)
				}
				continue
			}
			if _, err := store.Put(id, e); err != nil {
				if errors.Is(err, catalogmem.ErrTooLarge) {
					mem.log.Info("its catalog is too large to remember: it starts at once, every time", "err", err)
				} else {
					mem.log.Warn("cannot remember its catalog", "err", err)
				}
				return
			}
		}
	})
	return changed
}

// rememberFailure notes, beside its remembered catalog, that spec's
// start failed with err: `check` says so, and the next run starts it at
// once rather than list from memory what did not start.
func (mem *member) rememberFailure(spec config.Backend, err error) {
	store := mem.m.catalogs
	if store == nil {
		return
	}
	f := catalogmem.Failure{At: time.Now(), Reason: oneLine(err.Error())}
	ids := memoryIDs(spec, mem.m.runDir())
	mem.writeMemory(func() {
		for _, id := range ids {
			if err := store.NoteFailure(id, f); err != nil {
				mem.log.Warn("cannot remember that its start failed", "err", err)
				return
			}
		}
	})
}

// writeMemory runs write, a change of mem's file in the memory, apart
// from the caller; of writes that overtake one another, the last one
// scheduled is the one kept (a failure noted, then a start that worked).
// Exit waits for it (memoryWritten): an agent's session may end right
// after its first list (codex exec's does), and the next one is answered
// from memory only if the write outlived it.
func (mem *member) writeMemory(write func()) {
	gen := mem.memGen.Add(1)
	m := mem.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed && !m.exitLearning {
		return
	}
	m.wg.Add(1)
	m.memWrites.Add(1) // under m.mu, unclosed or learning: before memoryWritten's Wait
	go func() {
		defer m.wg.Done()
		defer m.memWrites.Done()
		mem.memMu.Lock()
		defer mem.memMu.Unlock()
		if gen < mem.memWritten {
			return // a later one was written already
		}
		mem.memWritten = gen
		write()
	}()
}

// memoryWrite bounds how long Exit waits for the writes of the memory in
// flight: a file written and synced to disk each.
const memoryWrite = time.Second

// memoryWritten waits, m closed, until the writes of the memory in flight
// are done, for memoryWrite at most. learn: first, within the same
// bound, the backends on their first start whose catalog is not known
// finish it and are written too (exitLearning): a backend slower than
// an agent's whole session (codex exec's first list does not wait for
// it) would otherwise never be remembered, and never offered to that
// agent. Not when the agent signalled: it wants mcp-mux gone now.
func (m *Mux) memoryWritten(learn bool) {
	t := time.NewTimer(memoryWrite)
	defer t.Stop()
	if learn {
		m.learnAtExit(t.C)
	}
	done := make(chan struct{})
	go func() { // ends with the last write, which is bounded by the disk
		m.memWrites.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-t.C:
		m.log.Warn("exiting before the remembered catalogs were written: the next run starts what they lack", "waited", memoryWrite)
	}
}

// learnAtExit waits, until timeout, for the first start of every backend
// whose catalog is not known; the writes it makes meanwhile are let
// through, and none after it returns.
func (m *Mux) learnAtExit(timeout <-chan time.Time) {
	m.mu.Lock()
	m.exitLearning = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.exitLearning = false
		m.mu.Unlock()
	}()
	for _, mem := range m.members() {
		mem.mu.Lock()
		known := mem.known
		mem.mu.Unlock()
		if known {
			continue
		}
		select {
		case <-mem.started: // after its catalog's write is scheduled (serve)
		case <-timeout:
			return
		}
	}
}

// sleep leaves the member not running, its catalog listed, in state
// (remembered or idle), until a request wants it (true) or it is stopped
// (false).
func (mem *member) sleep(state string) bool {
	mem.rest(state)
	mem.m.cat.rebuild(mem.m)
	return mem.waitUse(state)
}

// rest puts mem in state (remembered or idle), not running, its catalog
// listed once the catalog is rebuilt. A catalog remembered before the
// agent's capabilities are known is not yet what the first list waits
// for: settleRest decides, once they are, whether it is.
func (mem *member) rest(state string) {
	mem.mu.Lock()
	mem.state, mem.since, mem.b = state, time.Now(), nil
	mem.changedLocked()
	mem.mu.Unlock()
	mem.m.builtinChanged(uriBackends)
	mem.markInitialized()
	if state == stateIdle || !mem.m.agent.holdRest(mem) {
		mem.markStarted()
	}
}

// waitUse waits, mem at rest in state, until a request wants it (true) or
// it is stopped (false).
func (mem *member) waitUse(state string) bool {
	select {
	case <-mem.ctx.Done():
		return false
	case <-mem.use:
	}
	mem.mu.Lock()
	known := mem.known // else settleRest wants it started, and said why
	mem.mu.Unlock()
	if known {
		mem.log.Info("starting it: a request needs it", "was", state)
	}
	mem.setState(stateStarting, nil)
	return true
}

// restRemembered puts every member whose catalog is remembered at rest,
// with one rebuild of the catalog for all of them (twenty rebuilds, one a
// member, were a third of a warm start's CPU). The decoding runs on every
// core. It runs before the members' goroutines start (Start).
func (m *Mux) restRemembered(members []*member) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, mem := range members {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if mem.spec.Broken == "" && mem.startsWhenUsed() {
				mem.rest(stateRemembered)
				mem.atRest = true
			}
		})
	}
	wg.Wait()
	m.cat.rebuild(m)
}

// changedLocked wakes whoever waits for the member's state to change
// (backendForUse); mem.mu is held.
func (mem *member) changedLocked() {
	close(mem.stateChanged)
	mem.stateChanged = make(chan struct{})
}

// backendForUse is mem's backend for a request of the agent: started if it
// was not running (remembered or idle), waited for while it starts, up to
// startup_timeout. A backend down for any other reason gives its error.
func (mem *member) backendForUse(ctx context.Context) (*backends.Backend, error) {
	return mem.backendForUseNoting(ctx, nil)
}

// backendForUseNoting is backendForUse, calling waiting, if set, when it
// starts to wait and every second it goes on waiting.
func (mem *member) backendForUseNoting(ctx context.Context, waiting func(n int)) (*backends.Backend, error) {
	mem.lastUse.Store(time.Now().UnixNano())
	var timeout <-chan time.Time
	var tick <-chan time.Time
	n := 0
	for {
		mem.mu.Lock()
		state, b, known, ch := mem.state, mem.b, mem.known, mem.stateChanged
		mem.mu.Unlock()
		switch {
		case state == stateReady && b != nil:
			return b, nil
		case state == stateRemembered || state == stateIdle:
			select {
			case mem.use <- struct{}{}:
			default: // asked already
			}
		case state == stateStarting && known:
			// Woken: wait for it.
		default:
			return mem.backend()
		}
		if timeout == nil {
			t := time.NewTimer(mem.m.settings().StartupTimeout.Duration)
			defer t.Stop()
			timeout = t.C
			if waiting != nil {
				k := time.NewTicker(time.Second)
				defer k.Stop()
				tick = k.C
				n++
				waiting(n)
			}
		}
		select {
		case <-tick:
			n++
			waiting(n)
		case <-ch:
		case <-timeout:
			return nil, fmt.Errorf("backend %q did not start within startup_timeout (%s)", mem.spec.Name, mem.m.settings().StartupTimeout.Duration)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-mem.ctx.Done():
			return mem.backend()
		}
	}
}

// startNotice is what tells the agent, while its request waits for mem to
// start, that it does, as a log message of mcp-mux's own (level info), if
// the request may be sent log messages at that level (nil if not). Not as
// progress under the request's token: the backend's own progress follows
// under it, the values on a token must increase, and a count of seconds
// has no bound below the backend's values (its 1/6 came after a 1 of
// mux's). The token carries what the backend sends, as it does directly.
func (m *Mux) startNotice(ctx context.Context, mem *member, meta mcp.Meta) func(n int) {
	s := sessionFrom(ctx)
	if s == nil {
		return nil
	}
	level := s.requestLogLevel(meta)
	if level == "" || levelRank[level] > levelRank[mcp.LoggingLevel("info")] {
		return nil
	}
	spec := mem.specNow()
	return func(n int) {
		m.deliverFor(ctx, s, "notifications/message", &mcp.LoggingMessageParams{
			Level: "info", Logger: "mcp-mux", Data: fmt.Sprintf("waiting for %s to start (%d s)", spec.Label(), n-1)})
	}
}

// listed reports whether mem's part of the catalog is listed: it is ready,
// or not running with a catalog known (remembered, idle, or starting
// again for a request).
func (mem *member) listed() bool {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	return mem.listedLocked()
}

// listedLocked is listed, with mem.mu held.
func (mem *member) listedLocked() bool {
	if mem.state == stateReady && mem.b != nil {
		return true
	}
	return mem.known && (mem.state == stateRemembered || mem.state == stateIdle || mem.state == stateStarting)
}

// idleFor is how long mem may be idle before it is stopped (0: never), and
// whether it has nothing to do now: no request in flight, no subscription,
// no request of its own to the agent.
func (mem *member) idleNow(after time.Duration) bool {
	if after <= 0 {
		return false
	}
	mem.inflight.mu.Lock()
	busy := len(mem.inflight.calls)
	mem.inflight.mu.Unlock()
	if busy > 0 || len(mem.m.subs.Backend(mem.spec.Name)) > 0 {
		return false
	}
	last := time.Unix(0, mem.lastUse.Load())
	return time.Since(last) >= after
}

// stopIdle stops b, the member's backend, for idleness: requests from now
// on see it idle (and wake it) rather than a backend going away.
func (mem *member) stopIdle(b *backends.Backend) {
	mem.mu.Lock()
	mem.state, mem.since, mem.b = stateIdle, time.Now(), nil
	mem.changedLocked()
	mem.mu.Unlock()
	mem.idling = true
	b.Stop(mem.m.settings().ShutdownGrace.Duration)
}

// resourcesAtRest is the page of resources mem lists while it does not
// run: those it listed when last seen, if its catalog is listed; else nil.
func (mem *member) resourcesAtRest() *resourcePage {
	if !mem.listed() {
		return nil
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if mem.initResult == nil || mem.initResult.Capabilities == nil || mem.initResult.Capabilities.Resources == nil {
		return nil
	}
	page := &resourcePage{resources: mem.cat.resources, cache: mcp.Cacheable{CacheScope: "public"}}
	for _, r := range mem.cat.resources {
		uri, _ := resourceURI(r)
		page.uris = append(page.uris, uri)
	}
	return page
}

// drainForRestart makes new requests for mem wait for its next process
// (its catalog stays listed), then waits until those in flight are done,
// up to request_timeout, so that a restart of mux's own choosing (the
// agent's capabilities) fails no request.
func (mem *member) drainForRestart() {
	mem.mu.Lock()
	mem.state, mem.since, mem.b, mem.known = stateStarting, time.Now(), nil, true
	mem.changedLocked()
	mem.mu.Unlock()
	mem.m.builtinChanged(uriBackends)
	deadline := time.Now().Add(mem.m.requestTimeout(mem))
	for time.Now().Before(deadline) && mem.ctx.Err() == nil {
		mem.inflight.mu.Lock()
		busy := len(mem.inflight.calls)
		mem.inflight.mu.Unlock()
		if busy == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond) // a poll: requests end without telling
	}
}

// idleTicker is the channel serve checks idleness on (nil: never), every
// quarter of idle_stop, at least every 50 ms and at most every 30 s.
func (mem *member) idleTicker() (<-chan time.Time, func()) {
	spec := mem.specNow()
	after := spec.IdleAfter(mem.m.settings())
	if after <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(min(max(after/4, 50*time.Millisecond), 30*time.Second))
	return t.C, t.Stop
}

// StartPlan is when a backend of a config starts, as `check` says it: at
// once, or when first used because its catalog is remembered.
type StartPlan struct {
	Name       string    `json:"name"`
	Start      string    `json:"start"`      // its policy: auto, eager or lazy
	Remembered bool      `json:"remembered"` // its catalog is known: it starts when first used
	Seen       time.Time `json:"seen,omitzero"`
	Tools      int       `json:"tools"`
	Prompts    int       `json:"prompts"`
	Resources  int       `json:"resources"`
	// NoMemory: nothing is remembered (MCP_MUX_CATALOGS=off), so it
	// starts at once every time, check --connect or not.
	NoMemory bool `json:"no_memory,omitempty"`
	// LastFailure: its last start failed, so it starts at once to be
	// tried again, not when first used.
	LastFailure *catalogmem.Failure `json:"last_failure,omitempty"`
	// ByCheckOnly: every catalog remembered of it was taken for a client
	// of no capabilities (check --connect's): an agent that declares any
	// starts it once, and from then on it starts when that agent first
	// uses it.
	ByCheckOnly bool `json:"by_check_only,omitempty"`
}

// StartPlans says when each enabled backend of cfg starts.
func StartPlans(cfg *config.File) []StartPlan {
	store, _ := openCatalogs()
	var out []StartPlan
	for _, b := range cfg.Backends {
		if b.Disabled || b.Broken != "" {
			continue
		}
		p := StartPlan{Name: b.Name, Start: b.StartPolicy(&cfg.Mux), NoMemory: store == nil}
		if store != nil && p.Start != config.StartEager {
			dir, _ := os.Getwd()
			for _, id := range memoryIDs(b, dir) {
				e, ok := store.Lookup(id)
				if !ok {
					continue
				}
				p.Remembered, p.Seen, p.LastFailure = true, e.Seen, e.Failure
				p.ByCheckOnly = !slices.ContainsFunc(store.Shapes(id), func(c json.RawMessage) bool {
					return !catalogmem.SameJSON(c, catalogmem.Shape(nil))
				})
				p.Tools, p.Prompts, p.Resources = len(e.Tools), len(e.Prompts), len(e.Resources)
				break
			}
		}
		out = append(out, p)
	}
	return out
}
