package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// Backend states as shown by check and mcp-mux://backends.
const (
	stateStarting   = "starting"
	stateReady      = "ready"
	stateRestarting = "restarting"
	stateFailed     = "failed"
	stateStopped    = "stopped"
	// stateNeedsLogin: a remote server that signs in with OAuth has no
	// sign-in it accepts; the backend connects by itself once
	// `mcp-mux login NAME` stored one (supervise.go).
	stateNeedsLogin = "needs login"
)

// backendStates are every state a backend can be in (lazy.go has two
// more), one mcp_mux_backend_state series each.
var backendStates = []string{stateStarting, stateReady, stateRestarting, stateRemembered, stateIdle, stateStopped, stateFailed, stateNeedsLogin}

// kinds is a set of catalog parts.
type kinds uint8

const (
	kindTools kinds = 1 << iota
	kindPrompts
	kindResources // resources and resource templates: one list_changed covers both
	allKinds      = kindTools | kindPrompts | kindResources
)

// member is one configured backend as the mux sees it: its current process
// (if any), its state and its part of the catalog.
type member struct {
	m    *Mux
	spec config.Backend // a reload changes only its exposure fields (reload.go)
	// prefix is spec's effective prefix. A reload changes it, holding both
	// the catalog's rebuild lock and mu: read it holding either.
	prefix string
	log    *log.Logger

	// ctx ends when the member is stopped: mux closes, or a reload removed
	// or replaced it. Its goroutines (run, pollLoop) end with it.
	ctx    context.Context
	cancel context.CancelFunc
	// replaces: the member takes over from one that a reload changed, so
	// its first start is a restart to the agent (subscriptions restored).
	replaces bool

	started     chan struct{} // closed when the first start attempt has finished
	startedOnce sync.Once
	initialized chan struct{} // closed when the first initialize has finished (before the first listing)
	initOnce    sync.Once
	initResult  *mcp.InitializeResult // the last initialize's; guarded by mu
	wake        chan struct{}         // a refresh is wanted (cap 1: requests coalesce)
	reinit      chan struct{}         // the agent's capabilities came after the backend was told others (cap 1)
	inflight    inflight              // agent requests in flight to the backend
	resGen      atomic.Uint64         // resources/list_changed notifications so far (listahead.go)
	// reinitting: serve stopped the backend to start it again with the
	// agent's capabilities (run's goroutine only).
	reinitting bool
	// idling: serve stopped the backend after idle_stop (run's goroutine
	// only).
	idling bool
	// atRest: Start found its catalog remembered and put it at rest;
	// set before run starts, read by run only.
	atRest bool

	mu       sync.Mutex
	state    string
	b        *backends.Backend
	lastErr  string
	restarts int
	since    time.Time
	late     bool // still starting when the first list was answered without it
	dirty    kinds
	cat      memberCatalog
	stopped  bool                      // mux is closing: start nothing more
	learned  map[string]struct{}       // URIs the backend returned in tool results
	progress map[string]progressWaiter // progress token → the call awaiting it
	pollSums map[string]uint64         // local-only URI → hash of its last polled contents
	logLevel mcp.LoggingLevel          // what the running backend was last told with logging/setLevel

	// Start when used (lazy.go). known: cat is a whole catalog (from the
	// memory or a listing) that stays listed while the backend does not
	// run; remembered: what the memory holds of it, to tell a change.
	known        bool
	remembered   [3]uint64
	stateChanged chan struct{} // closed and replaced at each change of state
	use          chan struct{} // a request wants it started (cap 1)
	lastUse      atomic.Int64  // when a request last wanted it (unix ns)
	// memGen numbers the writes of its file in the memory as they are
	// scheduled; memWritten, guarded by memMu, is the last one written.
	memGen     atomic.Uint64
	memMu      sync.Mutex
	memWritten uint64
	idleChecks atomic.Int64 // idle_stop checks made (a test waits for them)

	// restCaps: the client capabilities its catalog at rest was taken
	// with (catalogmem.Shape; lazycaps.go). Guarded by mu.
	restCaps json.RawMessage

	series memberSeries // its request metrics by method (observe.go)
}

// memberCatalog is one backend's lists, as last fetched.
type memberCatalog struct {
	tools     []*mcp.Tool
	prompts   []*mcp.Prompt
	templates []*mcp.ResourceTemplate
	compiled  []uriTemplate // the templates that parse
	// matched is what compiled said of the URIs read lately (templateMatch).
	matched map[string]bool
	uris    map[string]struct{} // every URI it lists: exact routing and dedup
	nres    int
	sums    [3]uint64        // fingerprints per kind, to tell a real change from a no-op
	cache   [3]mcp.Cacheable // the lists' cache hints: tools, prompts, templates
	// raw is tools, prompts and templates as the backend sent them, item
	// for item (rawlist.go).
	raw     [3][]json.RawMessage
	tmplSum uint64 // the templates' part of sums[2]
	// resources are its resources as sent, for the memory and for listing
	// while it does not run (lazy.go); resourcesCut: there were more than
	// maxRememberedResources, and resources holds none.
	resources    []json.RawMessage
	resourcesCut bool
}

// rawAt is item i of list k (0 tools, 1 prompts, 2 templates) as the
// backend sent it, or nil if it is not known.
func (c *memberCatalog) rawAt(k, i int) json.RawMessage {
	if i < len(c.raw[k]) {
		return c.raw[k][i]
	}
	return nil
}

// maxLearned bounds the URIs remembered from tool results per backend.
const maxLearned = 10000

func newMember(m *Mux, spec config.Backend) *member {
	ctx, cancel := context.WithCancel(m.ctx)
	mem := &member{
		m:            m,
		spec:         spec,
		prefix:       spec.EffectivePrefix(),
		log:          m.log.With("backend", spec.Name),
		ctx:          ctx,
		cancel:       cancel,
		started:      make(chan struct{}),
		initialized:  make(chan struct{}),
		wake:         make(chan struct{}, 1),
		reinit:       make(chan struct{}, 1),
		state:        stateStarting,
		since:        time.Now(),
		learned:      map[string]struct{}{},
		progress:     map[string]progressWaiter{},
		pollSums:     map[string]uint64{},
		stateChanged: make(chan struct{}),
		use:          make(chan struct{}, 1),
	}
	if spec.Broken != "" {
		// Failed from the start, not once run gets to it: an initialize
		// that comes first must still tell the agent why it is missing.
		mem.state, mem.lastErr = stateFailed, spec.Broken
		mem.markStarted()
	}
	return mem
}

// hooks connect the backend's notifications to the mux. They run inside the
// go-sdk's dispatch for that backend: each only records or enqueues.
func (mem *member) hooks() backends.Hooks {
	return backends.Hooks{
		ToolsChanged:     func() { mem.markDirty(kindTools) },
		PromptsChanged:   func() { mem.markDirty(kindPrompts) },
		ResourcesChanged: func() { mem.resGen.Add(1); mem.markDirty(kindResources) },
		ResourceUpdated:  func(p *mcp.ResourceUpdatedNotificationParams) { mem.m.resourceUpdated(mem, p) },
		Progress:         mem.forwardProgress,
		Log:              mem.forwardLog,
	}
}

func (mem *member) markDirty(k kinds) {
	mem.mu.Lock()
	mem.dirty |= k
	mem.mu.Unlock()
	select {
	case mem.wake <- struct{}{}:
	default:
	}
}

// backend returns the running backend, or an error naming the backend and
// its state (requests to a backend that is down fail at once).
func (mem *member) backend() (*backends.Backend, error) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if mem.b == nil || mem.state != stateReady {
		return nil, &downError{mem.outageLocked()}
	}
	return mem.b, nil
}

func (mem *member) snapshot() memberCatalog {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	return mem.cat
}

// serving reports whether the backend is ready: only then is its part of
// the catalog listed. A backend that is down keeps its last catalog, so
// that a request for one of its names fails naming it and its state.
func (mem *member) serving() bool {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	return mem.state == stateReady && mem.b != nil
}

// refresh re-fetches the parts k of the backend's catalog. What changed
// is rebuilt into the merged catalog and, if announce, announced upstream
// (coalesced).
func (mem *member) refresh(ctx context.Context, k kinds, announce bool) {
	mem.mu.Lock()
	b := mem.b
	mem.mu.Unlock()
	if b == nil {
		return
	}
	caps := b.Capabilities()
	next := mem.snapshot()
	prev := next.sums
	// The lists are asked together: a start waits for one round trip, not
	// four. Each fills fields of next that no other touches.
	var wg sync.WaitGroup
	if k&kindTools != 0 && caps.Tools != nil {
		wg.Go(func() {
			tools, cache, err := listRaw(ctx, mem, b, "tools/list", "tools", "tool", func(t *mcp.Tool) bool { return mem.named("tool", t.Name) })
			if err != nil {
				mem.log.Warn("listing tools failed", "err", err)
			} else {
				next.tools, next.raw[0], next.cache[0] = values(tools), raws(tools), cache
				next.sums[0] = fingerprintRaw(tools)
			}
		})
	}
	if k&kindPrompts != 0 && caps.Prompts != nil {
		wg.Go(func() {
			prompts, cache, err := listRaw(ctx, mem, b, "prompts/list", "prompts", "prompt", func(p *mcp.Prompt) bool { return mem.named("prompt", p.Name) })
			if err != nil {
				mem.log.Warn("listing prompts failed", "err", err)
			} else {
				next.prompts, next.raw[1], next.cache[1] = values(prompts), raws(prompts), cache
				next.sums[1] = fingerprintRaw(prompts)
			}
		})
	}
	if k&kindResources != 0 && caps.Resources != nil {
		wg.Go(func() {
			items, cache, err := listRaw(ctx, mem, b, "resources/templates/list", "resourceTemplates", "resource template", mem.acceptTemplate)
			if err != nil {
				mem.log.Warn("listing resource templates failed", "err", err)
				return
			}
			tmpls := values(items)
			next.templates, next.raw[2], next.cache[2] = tmpls, raws(items), cache
			next.tmplSum = fingerprintRaw(items)
			next.compiled = nil
			for _, t := range tmpls {
				ut, err := uritemplate.New(t.URITemplate)
				if err != nil {
					mem.log.Warn("unparseable resource template: reads cannot route through it", "template", t.URITemplate, "err", err)
					continue
				}
				next.compiled = append(next.compiled, compileTemplate(ut, t.URITemplate))
			}
		})
		wg.Go(func() {
			// Only URIs are kept: the list itself is paged through live.
			// They are read as the list is served (listresources.go), from
			// the backend's bytes: a resource that lists reaches the
			// agent, and so must route.
			uris := map[string]struct{}{}
			var resources []json.RawMessage
			cut := false
			_, _, err := listPages(mem, func(c string) ([]*string, string, mcp.Cacheable, error) {
				page, err := fetchResources(ctx, b, c)
				if err != nil {
					return nil, "", mcp.Cacheable{}, err
				}
				if page.nulls > 0 {
					mem.log.Warn("null entry in the backend's list, skipped", "count", page.nulls)
				}
				items := make([]*string, len(page.uris))
				for i := range page.uris {
					items[i] = &page.uris[i]
					if cut || len(resources) >= maxRememberedResources {
						cut, resources = true, nil
					} else if u := page.uris[i]; u != "" && !hasBuiltinScheme(u) {
						resources = append(resources, page.resources[i])
					}
				}
				return items, page.next, page.cache, nil
			}, func(uri *string) bool {
				if mem.acceptURI(*uri) {
					uris[*uri] = struct{}{}
				}
				return false // only the URIs are kept
			})
			if err != nil {
				mem.log.Warn("listing resources failed", "err", err)
			} else {
				next.uris = uris
				next.nres = len(uris)
				next.resources, next.resourcesCut = resources, cut
			}
		})
	}
	wg.Wait()
	next.sums[2] = next.tmplSum ^ fingerprintKeys(next.uris)
	var changed kinds
	for i, kk := range []kinds{kindTools, kindPrompts, kindResources} {
		if next.sums[i] != prev[i] {
			changed |= kk
		}
	}
	mem.mu.Lock()
	if mem.b != b { // went down meanwhile: keep the cleared catalog
		mem.mu.Unlock()
		return
	}
	mem.cat = next
	mem.mu.Unlock()
	if changed != 0 {
		mem.m.cat.rebuild(mem.m)
		if changed&(kindResources|kindTools) != 0 {
			mem.m.logResourceCollisions()
		}
		if announce {
			mem.m.lists.markBackend(mem.spec.Name, changed)
		}
		mem.m.builtinChanged(uriBackends)
	}
}

func (mem *member) named(kind, name string) bool {
	if name == "" {
		mem.log.Warn("the backend lists a " + kind + " without a name, skipped")
		return false
	}
	return true
}

// acceptURI reports whether a listed resource's URI can be served through
// mux: not empty, and not in mux's own scheme (which would let a
// backend shadow or impersonate mcp-mux://backends).
func (mem *member) acceptURI(uri string) bool {
	if uri == "" {
		mem.log.Warn("resource without a URI in the backend's list, skipped")
		return false
	}
	if hasBuiltinScheme(uri) {
		mem.log.Warn("the backend lists a URI in mcp-mux's own scheme: refused", "uri", uri)
		return false
	}
	return true
}

func (mem *member) acceptTemplate(t *mcp.ResourceTemplate) bool {
	if t.URITemplate == "" {
		mem.log.Warn("the backend lists a resource template without a uriTemplate, skipped")
		return false
	}
	if hasBuiltinScheme(t.URITemplate) {
		mem.log.Warn("the backend has a template in mcp-mux's own scheme: refused", "template", t.URITemplate)
		return false
	}
	return true
}

func fingerprint(v any) uint64 {
	h := fnv.New64a()
	json.NewEncoder(h).Encode(v)
	return h.Sum64()
}

// fingerprintKeys hashes a set independent of map order.
func fingerprintKeys(set map[string]struct{}) uint64 {
	var sum uint64
	for k := range set {
		h := fnv.New64a()
		h.Write([]byte(k))
		sum += h.Sum64()
	}
	return sum + uint64(len(set))
}

// learn remembers URIs a tool result pointed at, so that reads of them route
// here even though the backend does not list them.
func (mem *member) learn(res *mcp.CallToolResult) {
	var uris []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.ResourceLink:
			uris = append(uris, c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				uris = append(uris, c.Resource.URI)
			}
		}
	}
	if len(uris) == 0 {
		return
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	for _, u := range uris {
		if len(mem.learned) >= maxLearned {
			for k := range mem.learned { // drop an arbitrary one: a bound, not an LRU
				delete(mem.learned, k)
				break
			}
		}
		mem.learned[u] = struct{}{}
	}
}

// learnRaw is learn for a tool result as the backend sent it: only a result
// that may hold a resource link or an embedded resource is decoded.
func (mem *member) learnRaw(res json.RawMessage) {
	if !bytes.Contains(res, []byte(`"resource`)) {
		return
	}
	var r mcp.CallToolResult
	if json.Unmarshal(res, &r) == nil {
		mem.learn(&r)
	}
}

// claims reports whether the backend can serve uri: it lists it exactly,
// one of its templates matches it, or a tool result of it pointed at it.
func (mem *member) claims(uri string) bool {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	return mem.claimsLocked(uri)
}

// claimsLocked is claims, with mem.mu held.
func (mem *member) claimsLocked(uri string) bool {
	if _, ok := mem.cat.uris[uri]; ok {
		return true
	}
	if mem.templateMatch(uri) {
		return true
	}
	_, ok := mem.learned[uri]
	return ok
}

// maxMatched bounds the URIs whose template match a backend keeps.
const maxMatched = 1024

// templateMatch reports whether one of the backend's templates matches uri,
// with mem.mu held. A match parses the URI afresh (over a hundred
// allocations), and an agent reads the same few URIs again and again: the
// answer is kept for as long as the catalog, which holds the templates.
func (mem *member) templateMatch(uri string) bool {
	if len(mem.cat.compiled) == 0 {
		return false
	}
	if ok, seen := mem.cat.matched[uri]; seen {
		return ok
	}
	if len(mem.cat.matched) >= maxMatched || mem.cat.matched == nil {
		mem.cat.matched = make(map[string]bool)
	}
	ok := matchesAny(mem.cat.compiled, uri)
	mem.cat.matched[uri] = ok
	return ok
}

// offered is the backend's own name of the tool or prompt of its last
// catalog that the agent knows as name (a tool override may rename it),
// if it has one.
func (mem *member) offered(kind, name string) (string, bool) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if kind == "tool" {
		for _, t := range mem.cat.tools {
			if mem.m.exposedName(mem, mem.spec.Shown(t.Name)) == name {
				return t.Name, true
			}
		}
		return "", false
	}
	for _, p := range mem.cat.prompts {
		if mem.m.exposedName(mem, p.Name) == name {
			return p.Name, true
		}
	}
	return "", false
}
