package mux

// Filters and names: the per-backend tools/exclude_tools and
// prompts/exclude_prompts globs (checked when the config is loaded,
// applied when the catalog is merged), the rule that two backends may not
// share a prefix, and the names too long for the agents that will see them.
//
// The filters are read from each member's spec at every catalog rebuild
// rather than applied when a backend's lists are fetched, so a reload that
// changes only them takes effect at once, without asking the backend again.

import (
	"fmt"
	"path"
	"strings"

	"github.com/mcp-mux/mcp-mux/backends"
)

// maxNameLength is the longest tool or prompt name several agents and LLM
// APIs accept (Claude's and OpenAI's tool names: ^[a-zA-Z0-9_-]{1,64}$).
const maxNameLength = 64

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
	if !mem.offered(kind, name) {
		return false
	}
	mem.mu.Lock()
	prefix := mem.prefix
	mem.mu.Unlock()
	original := name
	if prefix != "" {
		original = strings.TrimPrefix(name, prefix+m.cfg.Mux.ToolSeparator)
	}
	tools, prompts := mem.filters()
	if kind == "tool" {
		return tools.admits(original)
	}
	return prompts.admits(original)
}

// filterKeys are the spec's filter lists with their config keys, in the
// order the file documents them.
func filterKeys(s *backends.Spec) []struct {
	key, kind string
	patterns  []string
} {
	return []struct {
		key, kind string
		patterns  []string
	}{
		{"tools", "tool", s.Tools},
		{"exclude_tools", "tool", s.ExcludeTools},
		{"prompts", "prompt", s.Prompts},
		{"exclude_prompts", "prompt", s.ExcludePrompts},
	}
}

// validateFilters reports every filter pattern that path.Match cannot use.
// Disabled backends are checked too: a pattern does not depend on the
// machine, and the mistake would surface when the backend is enabled.
func (p *parser) validateFilters(bp keyPath, s *backends.Spec) {
	for _, f := range filterKeys(s) {
		for i, pat := range f.patterns {
			k := append(keyPath{bp[0]}, f.key).index(i)
			if pat == "" {
				p.add(k, `empty pattern: it matches no %s name (write "*" for all)`, f.kind)
				continue
			}
			if _, err := path.Match(pat, ""); err != nil {
				p.add(k, `invalid glob pattern %q: use * (any characters), ? (one character), [abc] or [a-z] (one of a set; [^...] for none of it), and \ before one of these for itself`, pat)
			}
		}
	}
}

// checkPrefixes reports enabled backends whose effective prefix (non-empty)
// is already another enabled backend's: their names would mix, and which
// backend a name belongs to would depend on what each lists. Unprefixed
// backends are allowed to share the empty prefix: that is asked for, and
// collisions between them are resolved by config order.
func (p *parser) checkPrefixes(entries []backendEntry, specs []backends.Spec) {
	type owner struct {
		name string
		seg  string
		line int
	}
	first := map[string]owner{}
	names := map[string]bool{}
	for i, s := range specs {
		if s.Disabled || i >= len(entries) || names[s.Name] {
			continue // a duplicate name is reported already
		}
		names[s.Name] = true
		pre := s.EffectivePrefix()
		if pre == "" || !backendNameRe.MatchString(pre) {
			continue // invalid ones are reported already
		}
		e := entries[i]
		key := "name"
		if s.Prefix != nil {
			key = "prefix"
		}
		k := keyPath{e.path[0], key}
		if o, dup := first[pre]; dup {
			where := o.seg
			if o.line > 0 {
				where += fmt.Sprintf(", line %d", o.line)
			}
			p.add(k, "prefix %q is already the prefix of backend %q (%s): give one of them another prefix", pre, o.name, where)
			continue
		}
		first[pre] = owner{name: s.Name, seg: e.path[0], line: p.lineOf(k)}
	}
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
		for _, f := range filterKeys(&spec) {
			var names []string
			if f.kind == "tool" {
				for _, t := range part.tools {
					names = append(names, t.Name)
				}
			} else {
				for _, p := range part.prompts {
					names = append(names, p.Name)
				}
			}
			for _, pat := range f.patterns {
				if !globMatchesSome(pat, names) {
					out = append(out, fmt.Sprintf("backend %q: %s pattern %q matches none of its %ss (it lists %d)", spec.Name, f.key, pat, f.kind, len(names)))
				}
			}
		}
	}
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
