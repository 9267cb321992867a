package mux

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-mux/mcp-mux/mux/override"
)

// catalog is the merged view of tools, prompts and templates of every ready
// backend, rebuilt whenever one backend's part changes. Resources are not in
// it: they can be huge, so lists page through the backends live.
type catalog struct {
	tools      named[mcp.Tool]
	prompts    named[mcp.Prompt]
	templates  []exposed[mcp.ResourceTemplate]
	collisions []Collision
	// cache is the hints of each merged list: tools, prompts, templates.
	cache [3]mcp.Cacheable
	// ui is the ui:// URIs that two backends both have, in the later
	// one's own form (uialias.go).
	ui *uiAliases
	// sep is the tool separator its names were made with, and prefixes
	// the prefix of every backend, ready or not: what shortens a name for
	// an agent whose limit it passes (fitnames.go).
	sep      string
	prefixes []string
}

// exposed is an item as the agent sees it (tools and prompts renamed with
// the backend's prefix) and where it came from.
type exposed[T any] struct {
	item     *T // a copy, with the exposed name
	original string
	mem      *member
	raw      json.RawMessage // the item as its backend sent it, with the exposed name (rawlist.go)
	// bare is a tool's or prompt's exposed name without the prefix: its
	// original, or what a tool override renames it (overrides.go).
	bare string
	// full is a tool's name in the merged catalog, which a session's
	// view may shorten (fitnames.go).
	full string
}

// named is a list of tools or prompts indexed by exposed name.
type named[T any] struct {
	items []exposed[T]
	idx   map[string]int
}

// add appends item as name unless the name is taken; then it returns the
// backend that has it (the first in config order wins).
func (l *named[T]) add(name string, e exposed[T]) (taken *member) {
	if i, dup := l.idx[name]; dup {
		return l.items[i].mem
	}
	if l.idx == nil {
		l.idx = map[string]int{}
	}
	l.idx[name] = len(l.items)
	l.items = append(l.items, e)
	return nil
}

func (l *named[T]) lookup(name string) (exposed[T], bool) {
	i, ok := l.idx[name]
	if !ok {
		return exposed[T]{}, false
	}
	return l.items[i], true
}

// Collision is a name (or resource URI) that two backends both offer: the
// first in config order wins, the other's item is not exposed.
type Collision struct {
	Kind   string `json:"kind"` // tool, prompt, resource
	Name   string `json:"name"`
	Winner string `json:"winner"`
	Loser  string `json:"loser"`
	// Fixed: the loser keeps the item under this name of its own (a
	// ui:// URI: uialias.go), so nothing is hidden.
	Fixed string `json:"fixed,omitempty"`
}

type catalogHolder struct {
	mu  sync.Mutex // serializes rebuilds
	cur atomic.Pointer[catalog]
	// longWarned: exposed names over maxNameLength already logged, so
	// each is logged once, not at every rebuild; guarded by mu.
	longWarned map[string]struct{}

	logged sync.Mutex
	resLog map[Collision]bool // resource collisions logged already
}

func (h *catalogHolder) get() *catalog { return h.cur.Load() }

// exposedName is what the agent calls a backend's tool or prompt.
func (m *Mux) exposedName(mem *member, name string) string {
	if mem.prefix == "" {
		return name
	}
	return mem.prefix + m.cfg.Mux.ToolSeparator + name
}

func (h *catalogHolder) rebuild(m *Mux) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.cur.Load()
	c := &catalog{ui: buildUIAliases(m.members()), sep: m.cfg.Mux.ToolSeparator}
	for _, mem := range m.members() {
		if mem.prefix != "" { // read under the rebuild lock (member.go)
			c.prefixes = append(c.prefixes, mem.prefix)
		}
	}
	collide := func(kind, name string, winner, loser *member) {
		c.collisions = append(c.collisions, Collision{Kind: kind, Name: name, Winner: winner.spec.Name, Loser: loser.spec.Name})
	}
	parts := 0
	for _, mem := range m.members() {
		if !mem.listed() {
			continue
		}
		part := mem.snapshot()
		for i := range c.cache {
			c.cache[i] = mergeCache(c.cache[i], parts > 0, part.cache[i])
		}
		parts++
		tf, pf := mem.filters()
		overrides := mem.overrides()
		for i, t := range part.tools {
			if !tf.admits(t.Name) {
				continue
			}
			cp, raw := *t, part.rawAt(0, i)
			if o, ok := overrides[t.Name]; ok {
				cp, raw = override.Apply(o, cp, raw)
			}
			bare := cp.Name
			cp.Name = m.exposedName(mem, bare)
			if ownTool(cp.Name) {
				// mux's own name (toolsearch.go): mux wins.
				c.collisions = append(c.collisions, Collision{Kind: "tool", Name: cp.Name, Winner: "mcp-mux", Loser: mem.spec.Name})
				continue
			}
			if w := c.tools.add(cp.Name, exposed[mcp.Tool]{&cp, t.Name, mem, c.ui.withUIAliases(mem, renamed(raw, cp.Name, &cp)), bare, cp.Name}); w != nil {
				collide("tool", cp.Name, w, mem)
			}
		}
		for i, p := range part.prompts {
			if !pf.admits(p.Name) {
				continue
			}
			cp := *p
			cp.Name = m.exposedName(mem, p.Name)
			if w := c.prompts.add(cp.Name, exposed[mcp.Prompt]{&cp, p.Name, mem, renamed(part.rawAt(1, i), cp.Name, &cp), p.Name, ""}); w != nil {
				collide("prompt", cp.Name, w, mem)
			}
		}
		for i, t := range part.templates {
			raw := part.rawAt(2, i)
			if raw == nil {
				raw, _ = json.Marshal(t)
			}
			c.templates = append(c.templates, exposed[mcp.ResourceTemplate]{t, t.URITemplate, mem, raw, "", ""})
		}
	}
	if parts == 0 {
		for i := range c.cache {
			c.cache[i] = normalCache(c.cache[i])
		}
	}
	for _, col := range c.collisions {
		if old == nil || !hasCollision(old.collisions, col) {
			m.log.Warn("name collision: the first backend in config order wins", "kind", col.Kind, "name", col.Name, "winner", col.Winner, "loser", col.Loser)
		}
	}
	h.warnLong(m, c)
	h.cur.Store(c)
}

// warnLong logs each exposed name over maxNameLength the first time it
// appears. Called with h.mu held.
func (h *catalogHolder) warnLong(m *Mux, c *catalog) {
	warn := func(kind, name, backend string) {
		if len(name) <= maxNameLength {
			return
		}
		if _, done := h.longWarned[name]; done {
			return
		}
		if h.longWarned == nil {
			h.longWarned = map[string]struct{}{}
		}
		h.longWarned[name] = struct{}{}
		m.log.Warn(longNameWarning(kind, name), "backend", backend)
	}
	for _, t := range c.tools.items {
		warn("tool", t.item.Name, t.mem.spec.Name)
	}
	for _, p := range c.prompts.items {
		warn("prompt", p.item.Name, p.mem.spec.Name)
	}
}

func hasCollision(list []Collision, c Collision) bool {
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

// logResourceCollisions logs each resource collision the first time it is
// seen: a backend's resources changed.
func (m *Mux) logResourceCollisions() {
	h := &m.cat
	for _, col := range m.resourceCollisions() {
		h.logged.Lock()
		done := h.resLog[col]
		if !done {
			if h.resLog == nil {
				h.resLog = map[Collision]bool{}
			}
			h.resLog[col] = true
		}
		h.logged.Unlock()
		if done {
			continue
		}
		if col.Fixed != "" {
			m.log.Warn("resource collision, fixed: the later backend's URI has a form of its own", "kind", col.Kind, "uri", col.Name, "first", col.Winner, "later", col.Loser, "its_uri", col.Fixed)
			continue
		}
		m.log.Warn("resource collision: the first backend in config order wins", "kind", col.Kind, "name", col.Name, "winner", col.Winner, "loser", col.Loser)
	}
}

// resourceCollisions lists what two backends could both serve, with the
// owner (the first in config order): a URI both list, a URI one lists that
// the other's template matches, and templates that overlap.
func (m *Mux) resourceCollisions() []Collision {
	var out []Collision
	members := m.members()
	parts := make([]memberCatalog, len(members))
	for i, mem := range members {
		parts[i] = mem.snapshot()
	}
	ui := m.cat.get().ui
	for i, a := range members {
		for j := i + 1; j < len(members); j++ {
			b := members[j]
			for u := range parts[j].uris {
				if _, ok := parts[i].uris[u]; ok || matchesAny(parts[i].compiled, u) {
					col := Collision{Kind: "resource", Name: u, Winner: a.spec.Name, Loser: b.spec.Name}
					if own := ui.alias(b, u); own != u {
						col.Fixed = own
					}
					out = append(out, col)
				}
			}
			for u := range parts[i].uris {
				if _, ok := parts[j].uris[u]; !ok && matchesAny(parts[j].compiled, u) {
					out = append(out, Collision{Kind: "resource", Name: u, Winner: a.spec.Name, Loser: b.spec.Name})
				}
			}
			for _, ta := range parts[i].templates {
				for _, tb := range parts[j].templates {
					if templatesOverlap(ta.URITemplate, tb.URITemplate) {
						name := ta.URITemplate
						if tb.URITemplate != name {
							name += " / " + tb.URITemplate
						}
						out = append(out, Collision{Kind: "template", Name: name, Winner: a.spec.Name, Loser: b.spec.Name})
					}
				}
			}
		}
	}
	return out
}

// uriTemplate is a compiled resource template and its literal start: a
// URI that does not begin with it cannot match, and that check is far
// cheaper than the match (a listing checks every URI of a backend against
// the templates of every backend before it).
type uriTemplate struct {
	t      *uritemplate.Template
	prefix string
}

func compileTemplate(t *uritemplate.Template, raw string) uriTemplate {
	prefix, _, _ := strings.Cut(raw, "{")
	return uriTemplate{t, prefix}
}

func matchesAny(ts []uriTemplate, uri string) bool {
	for _, t := range ts {
		if strings.HasPrefix(uri, t.prefix) && t.t.Match(uri) != nil {
			return true
		}
	}
	return false
}

// templatesOverlap reports whether two URI templates may match a common URI,
// judged by their literal parts before the first expression: when one is a
// prefix of the other, some URI may match both (a heuristic: deciding it
// exactly for RFC 6570 templates is not worth its cost in a config check).
func templatesOverlap(a, b string) bool {
	pa, _, _ := strings.Cut(a, "{")
	pb, _, _ := strings.Cut(b, "{")
	return strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)
}
