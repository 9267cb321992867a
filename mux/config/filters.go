package config

// Filters and prefixes: the per-backend tools/exclude_tools and
// prompts/exclude_prompts globs must compile (mux applies them when it
// merges the catalogs, see mux/filters.go), and two backends may not share
// a prefix.

import (
	"fmt"
	"path"
	"strings"
)

// validateFilters reports every filter pattern that path.Match cannot use.
// Disabled backends are checked too: a pattern does not depend on the
// machine, and the mistake would surface when the backend is enabled.
func (p *parser) validateFilters(bp keyPath, s *Backend) {
	for _, f := range s.Filters() {
		for i, pat := range f.Patterns {
			k := append(keyPath{bp[0]}, f.Key).index(i)
			if s.FilterLines == nil {
				s.FilterLines = map[string][]int{}
			}
			s.FilterLines[f.Key] = append(s.FilterLines[f.Key], p.lineOf(k))
			if pat == "" {
				p.add(k, `empty pattern: it matches no %s name (write "*" for all)`, f.Kind)
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
func (p *parser) checkPrefixes(entries []backendEntry, specs []Backend) {
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
			where := displaySeg(o.seg)
			if o.line > 0 {
				where += fmt.Sprintf(", line %d", o.line)
			}
			p.add(k, "prefix %q is already the prefix of backend %q (%s): give one of them another prefix", pre, o.name, where)
			continue
		}
		first[pre] = owner{name: s.Name, seg: e.path[0], line: p.lineOf(k)}
	}
}

// PatternAt is where the i-th pattern of b's key (tools, exclude_tools,
// prompts, exclude_prompts, pin) is, as FILE:LINE (FILE if unknown).
func (b *Backend) PatternAt(file, key string, i int) string {
	if lines := b.FilterLines[key]; i < len(lines) && lines[i] > 0 {
		return fmt.Sprintf("%s:%d", file, lines[i])
	}
	return file
}

// PrefixFix is the likely fix of a tools glob that matches none of the
// names it is written against, "" if there is none. A backend's globs
// take its own names: one written with the prefix (prefix is the
// backend's with the separator, "github__") matches once it is removed. A
// profile's take the names the agent sees: one written without the prefix
// matches once it is added (add). names are the names the fixed glob
// must match one of.
func PrefixFix(pattern, prefix string, add bool, names []string) string {
	if prefix == "" {
		return ""
	}
	fix, ok := strings.CutPrefix(pattern, prefix)
	if add {
		fix, ok = prefix+pattern, !strings.HasPrefix(pattern, prefix)
	}
	if !ok || fix == "" {
		return ""
	}
	for _, n := range names {
		if matched, _ := path.Match(fix, n); matched {
			return fix
		}
	}
	return ""
}
