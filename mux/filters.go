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
	"strings"

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

// checkWarnings is what `check` warns about of the backends whose
// catalogs are known (remembered, or listed by a backend started):
// filter patterns that match none of a backend's names (a typo, the
// prefix written in a backend's own names, a tool the backend renamed),
// then exposed names longer than maxNameLength.
func (m *Mux) checkWarnings() []string {
	out := m.backendFilterWarnings()
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

// backendFilterWarnings are checkWarnings' of the backends' own filters.
func (m *Mux) backendFilterWarnings() []string {
	out := []string{}
	file := m.conf.Load().cfg.Path
	for _, mem := range m.members() {
		if !mem.listed() {
			continue // its lists are unknown: nothing can be said
		}
		part := mem.snapshot()
		mem.mu.Lock()
		spec, prefix := mem.spec, mem.prefix
		mem.mu.Unlock()
		if prefix != "" {
			prefix += m.cfg.Mux.ToolSeparator
		}
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
			for j, pat := range f.Patterns {
				if globMatchesSome(pat, names) {
					continue
				}
				w := fmt.Sprintf("%s: backend %q: %s pattern %q matches none of its %ss (it lists %d)", spec.PatternAt(file, f.Key, j), spec.Name, f.Key, pat, f.Kind, len(names))
				if fix := config.PrefixFix(pat, prefix, false, names); fix != "" {
					w += fmt.Sprintf("; did you mean %q? (a backend's %s take its own names, without the prefix)", fix, f.Key)
				}
				out = append(out, w)
			}
		}
	}
	return out
}

// logFilterWarnings logs what check would warn about the filters of the
// backends and profiles whose catalogs are known now, each warning once
// per start: a filter that leaves an agent without the tools meant is
// otherwise silent. (Long names are logged as the catalog is merged.)
func (m *Mux) logFilterWarnings() {
	for _, w := range append(m.backendFilterWarnings(), m.profileWarnings()...) {
		if _, seen := m.warned.LoadOrStore(w, true); !seen {
			m.log.Warn(w)
		}
	}
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

// filteredOut tells the agent (and so the user) which backends of v have
// tools and show none, because a tools filter (the backend's, or v's
// profile's) matches none of them: as a failed backend is told of
// (notRunning), the user reads it where the tools are missing.
func (m *Mux) filteredOut(v *view) string {
	base := m.cat.get()
	shown := map[*member]int{}
	for _, e := range base.tools.items {
		shown[e.mem]++
	}
	inView := shown
	if !v.all() {
		inView = map[*member]int{}
		for _, e := range v.of(base).tools.items {
			inView[e.mem]++
		}
	}
	file := m.conf.Load().cfg.Path
	if !v.all() && v.p.Broken != "" {
		return fmt.Sprintf("\n\n## Profile %s shows nothing\n\nIts [profile.%s] in the config has mistakes, and shows nothing rather than more than meant; the user fixes them and saves the config file (mcp-mux applies it at once):\n\n%s", v.p.Name, v.p.Name, v.p.Broken)
	}
	var sb strings.Builder
	for _, mem := range v.members(m.members()) {
		if !mem.listed() || inView[mem] > 0 {
			continue
		}
		own := len(mem.snapshot().tools)
		tf, _ := mem.filters()
		spec := mem.specNow()
		var why string
		switch {
		case own == 0:
			continue
		case shown[mem] == 0 && tf.allow != nil:
			why = fmt.Sprintf("its tools filter in the config (%s) matches none of the %d it has", spec.PatternAt(file, "tools", 0), own)
		case shown[mem] == 0:
			continue // its exclude_tools, or collisions: what was asked for
		case !v.all() && v.p.Tools != nil:
			why = fmt.Sprintf("the tools filter of profile %s (%s) matches none of the %d it has", v.p.Name, v.p.PatternAt(file, "tools", 0), shown[mem])
		default:
			continue // the profile's exclude_tools: what was asked for
		}
		if sb.Len() == 0 {
			sb.WriteString("\n\n## Servers that show no tools")
		}
		fmt.Fprintf(&sb, "\n\n- %s shows no tools: %s; the user fixes the filter and saves the config file (mcp-mux applies it at once)", mem.spec.Name, why)
	}
	return sb.String()
}
