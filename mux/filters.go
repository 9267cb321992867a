package mux

// Filters and names as the catalog applies them: the per-backend
// tools/exclude_tools and prompts/exclude_prompts globs (checked when the
// config is loaded, in config/filters.go), and the names too long for the
// agents that will see them.
//
// The filters are read from each member's config at every catalog rebuild
// rather than applied when a backend's lists are fetched, so a reload that
// changes only them takes effect at once, without asking the backend again.

import (
	"fmt"
	"path"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// maxNameLength is the longest tool or prompt name several agents and LLM
// APIs accept (Claude's and OpenAI's tool names: ^[a-zA-Z0-9_-]{1,64}$).
const maxNameLength = config.MaxNameLength

// nameFilter is one kind's allow list (nil: everything) and exclude list.
type nameFilter struct{ allow, exclude []string }

// admits reports whether a backend's own name passes the filter. Patterns
// were checked when the config was loaded; one that is not valid anyway
// (a Config built in code) matches nothing.
func (f nameFilter) admits(name string) bool {
	if f.allow != nil && !matchesGlob(f.allow, name) {
		return false
	}
	return !matchesGlob(f.exclude, name)
}

func matchesGlob(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// filters returns the member's tool and prompt filters. A reload may
// change the spec's exposure fields while a rebuild runs, hence the lock.
func (mem *member) filters() (tools, prompts nameFilter) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	s := &mem.spec
	return nameFilter{s.Tools, s.ExcludeTools}, nameFilter{s.Prompts, s.ExcludePrompts}
}

// offersVisible is offered, minus what the filters hide: a filtered name
// must get the same answer as one that never existed, even while its
// backend is down.
func (m *Mux) offersVisible(mem *member, kind, name string) bool {
	original, ok := mem.offered(kind, name)
	if !ok {
		return false
	}
	tools, prompts := mem.filters()
	if kind == "tool" {
		return tools.admits(original)
	}
	return prompts.admits(original)
}

// checkWarnings is what `check --connect` warns about once every backend
// has started: filter patterns that match none of a ready backend's names
// (a typo, or a tool the backend renamed), then exposed names longer than
// maxNameLength.
func (m *Mux) checkWarnings() []string {
	out := []string{}
	for _, mem := range m.members() {
		if !mem.serving() {
			continue // its lists are unknown: nothing can be said
		}
		part := mem.snapshot()
		mem.mu.Lock()
		spec := mem.spec
		mem.mu.Unlock()
		for _, f := range spec.Filters() {
			var names []string
			if f.Kind == "tool" {
				for _, t := range part.tools {
					names = append(names, t.Name)
				}
			} else {
				for _, p := range part.prompts {
					names = append(names, p.Name)
				}
			}
			for _, pat := range f.Patterns {
				if !globMatchesSome(pat, names) {
					out = append(out, fmt.Sprintf("backend %q: %s pattern %q matches none of its %ss (it lists %d)", spec.Name, f.Key, pat, f.Kind, len(names)))
				}
			}
		}
	}
	out = append(out, m.overrideWarnings()...)
	out = append(out, m.profileWarnings()...)
	c := m.cat.get()
	for _, t := range c.tools.items {
		if w := longNameWarning("tool", t.item.Name); w != "" {
			out = append(out, w)
		}
	}
	for _, p := range c.prompts.items {
		if w := longNameWarning("prompt", p.item.Name); w != "" {
			out = append(out, w)
		}
	}
	return out
}

func globMatchesSome(pattern string, names []string) bool {
	for _, n := range names {
		if ok, _ := path.Match(pattern, n); ok {
			return true
		}
	}
	return false
}

// longNameWarning is "" for a name agents accept, else what to do about it.
func longNameWarning(kind, name string) string {
	if len(name) <= maxNameLength {
		return ""
	}
	return fmt.Sprintf("%s name %q is %d characters, over the %d that several agents and LLM APIs accept: shorten the backend's prefix (or set prefix = \"\"), or leave the %s out with exclude_%ss",
		kind, name, len(name), maxNameLength, kind, kind)
}
