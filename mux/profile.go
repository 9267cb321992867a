package mux

// Profiles ([profile.NAME], mux/config/profile.go): each agent session
// may see a view of the merged catalog, some backends and some of their
// tools, instead of all of it. The catalog stays one, shared: a view is a
// filter applied per session where the agent lists, and where a name or
// URI it sends is resolved (route.go, passthrough.go, toolsearch.go,
// listresources.go, instructions.go, builtin.go), so that what is outside
// it gets the very answer of what does not exist.
//
// A session's profile is the one it asked for (the launch's --profile
// for stdio, /mcp/NAME or the Mcp-Mux-Profile header over HTTP), else the
// first whose clients match its clientInfo name, else none: everything.
// A stdio mcp-mux launched with --profile runs only that profile's
// backends (onlyProfile): the others never start.

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// Option changes how New builds the mux.
type Option func(*Mux)

// WithProfile makes name the profile of every session (mcp-mux --profile
// NAME, over stdio): only its backends run, and only its tools are seen.
func WithProfile(name string) Option {
	return func(m *Mux) { m.launch = name }
}

// WithEnviron makes the mux serve a session launched with environ in cwd
// rather than mcp-mux's own (the shared mcp-mux serves sessions of other
// agents): a reload reads the config file for environ
// (config.LoadForServingIn, as its caller read it for New), and each
// local backend starts from environ, in cwd unless it has its own.
func WithEnviron(environ []string, cwd string) Option {
	return func(m *Mux) { m.environ, m.cwd = environ, cwd }
}

// WithPool makes the Mux share its backends through pool with the other
// Muxes of the process (the shared mcp-mux's classes of sessions): a
// backend whose process would run alike for them (backends.Identity) runs
// once, unless its share is "never".
func WithPool(pool *backends.Pool) Option {
	return func(m *Mux) { m.pool = pool }
}

// UnknownProfileError is the error for a profile the config lacks, naming
// those it has.
func UnknownProfileError(cfg *config.File, name string) error {
	names := cfg.ProfileNames()
	if len(names) == 0 {
		return fmt.Errorf("unknown profile %q: %s has no [profile.NAME] sections", name, cfg.Path)
	}
	return fmt.Errorf("unknown profile %q: the profiles of %s are %s", name, cfg.Path, strings.Join(names, ", "))
}

// onlyProfile is cfg with only the backends of the profile called name
// (none if cfg lacks it): what a stdio mcp-mux launched with --profile
// runs.
func onlyProfile(cfg *config.File, name string) *config.File {
	if name == "" {
		return cfg
	}
	cp := *cfg
	p, ok := cfg.Profile(name)
	cp.Backends = nil
	for _, b := range cfg.Backends {
		if ok && p.HasBackend(b.Name) {
			cp.Backends = append(cp.Backends, b)
		}
	}
	return &cp
}

// view is one profile as sessions see it; a nil *view is everything. A
// view with a fitter is also one agent's names (fitnames.go); p is nil
// then for everything.
type view struct {
	p   *config.Profile
	fit *fitter
	// cat is the catalog filtered for the view, and the catalog it was
	// made of: made again when that is not the catalog now.
	cat atomic.Pointer[viewCatalog]
}

type viewCatalog struct{ base, view *catalog }

// views are the views of one config in effect.
type views struct {
	conf   *loadedConfig
	byName map[string]*view
	none   *view // a profile the config does not have (any more): nothing
	// fitted is each of those views (and nil, everything) with each
	// agent's names.
	fitted map[fitKey]*view
}

type fitKey struct {
	v *view
	f *fitter
}

// views are the views of the config in effect, made once per config.
func (m *Mux) views() *views {
	lc := m.conf.Load()
	if vs := m.profileViews.Load(); vs != nil && vs.conf == lc {
		return vs
	}
	vs := &views{conf: lc, byName: map[string]*view{}, none: &view{p: &config.Profile{Broken: "not in the config"}}}
	for i := range lc.cfg.Profiles {
		p := &lc.cfg.Profiles[i]
		vs.byName[p.Name] = &view{p: p}
	}
	vs.fitted = map[fitKey]*view{}
	for _, f := range m.fitters {
		vs.fitted[fitKey{nil, f}] = &view{fit: f}
		vs.fitted[fitKey{vs.none, f}] = &view{p: vs.none.p, fit: f}
		for _, v := range vs.byName {
			vs.fitted[fitKey{v, f}] = &view{p: v.p, fit: f}
		}
	}
	m.profileViews.Store(vs)
	return vs
}

// askProfile records the profile the agent of s asked for: the first it
// names is its profile for the whole session.
func (s *session) askProfile(name string) {
	if name = strings.TrimSpace(name); name != "" {
		s.profile.CompareAndSwap(nil, &name)
	}
}

// viewOf is the view s sees: nil for everything, with the full names.
func (m *Mux) viewOf(s *session) *view {
	vs := m.views()
	v := vs.profileOf(m, s)
	if f := m.fitterOf(s); f != nil {
		return vs.fitted[fitKey{v, f}]
	}
	return v
}

// profileOf is the view of the profile of s: nil for none.
func (vs *views) profileOf(m *Mux, s *session) *view {
	name := m.launch
	if s != nil {
		if asked := s.profile.Load(); asked != nil {
			name = *asked
		}
	}
	if name != "" {
		if v, ok := vs.byName[name]; ok {
			return v
		}
		return vs.none
	}
	if s == nil || len(vs.byName) == 0 {
		return nil
	}
	if p := s.initParams(); p != nil && p.ClientInfo != nil {
		if pr, ok := vs.conf.cfg.ProfileForClient(p.ClientInfo.Name); ok {
			return vs.byName[pr.Name]
		}
	}
	return nil
}

// all reports whether v has every backend and tool (of whatever name).
func (v *view) all() bool { return v == nil || v.p == nil }

// profileName is the name of v's profile, "" for everything.
func (v *view) profileName() string {
	if v.all() {
		return ""
	}
	return v.p.Name
}

// has reports whether mem is in the view.
func (v *view) has(mem *member) bool {
	return v.all() || v.p.HasBackend(mem.spec.Name)
}

// hasTool reports whether the tool exposed (its full name) is in the view.
func (v *view) hasTool(mem *member, exposed string) bool {
	return v.all() || v.p.HasTool(mem.spec.Name, exposed)
}

// members are those of members in the view.
func (v *view) members(members []*member) []*member {
	if v.all() {
		return members
	}
	out := make([]*member, 0, len(members))
	for _, mem := range members {
		if v.has(mem) {
			out = append(out, mem)
		}
	}
	return out
}

// catalogFor is the merged catalog as s sees it.
func (m *Mux) catalogFor(s *session) *catalog {
	return m.viewOf(s).of(m.cat.get())
}

// of is base as the view sees it: its backends' tools (those its globs
// admit), prompts and templates.
func (v *view) of(base *catalog) *catalog {
	if v == nil {
		return base
	}
	if c := v.cat.Load(); c != nil && c.base == base {
		return c.view
	}
	c := base
	if !v.all() {
		c = &catalog{collisions: base.collisions, cache: base.cache, ui: base.ui, sep: base.sep, prefixes: base.prefixes}
		for _, e := range base.tools.items {
			if v.hasTool(e.mem, e.item.Name) {
				c.tools.add(e.item.Name, e)
			}
		}
		for _, e := range base.prompts.items {
			if v.has(e.mem) {
				c.prompts.add(e.item.Name, e)
			}
		}
		for _, e := range base.templates {
			if v.has(e.mem) {
				c.templates = append(c.templates, e)
			}
		}
	}
	if v.fit != nil {
		// The agent's names of the whole catalog, whatever the profile
		// shows: the same in every profile.
		if r := v.fit.renames(base); r != nil {
			c = c.withRenames(r)
		}
	}
	v.cat.Store(&viewCatalog{base, c})
	return c
}

// toolListOf is the [mux] tool_list and tool_list_max for s: its
// profile's where it sets them.
func (m *Mux) toolListOf(s *session) (mode string, max int) {
	set := m.settings()
	mode, max = set.ToolList, set.ToolListMax
	if v := m.viewOf(s); !v.all() {
		if v.p.ToolList != "" {
			mode = v.p.ToolList
		}
		if v.p.ToolListMax > 0 {
			max = v.p.ToolListMax
		}
	}
	return mode, max
}

// unknownProfile is nil if the config in effect has the profile an HTTP
// request asks for (by its path, /mcp/NAME, or header: the HTTP door),
// else the error that names those it has. No profile's name has a "/",
// whatever a quoted TOML key allows: /mcp/a/b is not a profile's path.
func (m *Mux) unknownProfile(name string) error {
	cfg := m.conf.Load().cfg
	if _, ok := cfg.Profile(name); !ok || strings.Contains(name, "/") {
		return UnknownProfileError(cfg, name)
	}
	return nil
}

// hiddenFromView reports whether the backend called name is outside v.
func hiddenFromView(v *view, name string) bool {
	return !v.all() && !v.p.HasBackend(name)
}

// viewStatus is st with only the backends of v.
func viewStatus(v *view, st []BackendStatus) []BackendStatus {
	if v.all() {
		return st
	}
	return slices.DeleteFunc(st, func(b BackendStatus) bool { return hiddenFromView(v, b.Name) })
}

// profileWarnings is what `check --connect` says of the profiles once
// every backend has started: a tools or exclude_tools pattern that matches
// none of the tools its backends offer (when they all are serving).
func (m *Mux) profileWarnings() []string {
	var out []string
	cfg := m.conf.Load().cfg
	cat := m.cat.get()
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		v := &view{p: p}
		known := true
		for _, mem := range v.members(m.members()) {
			known = known && mem.listed()
		}
		if !known || p.Broken != "" {
			continue // its lists are unknown: nothing can be said
		}
		var names []string
		byMember := map[*member][]string{}
		for _, e := range cat.tools.items {
			if v.has(e.mem) {
				names = append(names, e.item.Name)
				byMember[e.mem] = append(byMember[e.mem], e.item.Name)
			}
		}
		for _, f := range []struct {
			key      string
			patterns []string
		}{{"tools", p.Tools}, {"exclude_tools", p.ExcludeTools}} {
			for j, pat := range f.patterns {
				if globMatchesSome(pat, names) {
					continue
				}
				w := fmt.Sprintf("%s: pattern %q matches none of the %d tools of its backends (globs match the names the agent sees, with the prefix: \"github__*issue*\")", p.PatternAt(cfg.Path, f.key, j), pat, len(names))
				for _, mem := range v.members(m.members()) {
					mem.mu.Lock()
					prefix := mem.prefix
					mem.mu.Unlock()
					if prefix == "" {
						continue
					}
					if fix := config.PrefixFix(pat, prefix+m.cfg.Mux.ToolSeparator, true, byMember[mem]); fix != "" {
						w += fmt.Sprintf("; did you mean %q?", fix)
						break
					}
				}
				out = append(out, w)
			}
		}
	}
	return out
}
