package config

// Profiles: [profile.NAME] tables, each a view of the backends and tools
// for the agents that ask for it (mcp-mux --profile NAME, /mcp/NAME, the
// Mcp-Mux-Profile header) or whose clientInfo name its clients match. The
// mux applies a profile per session (mux/profile.go); here they are
// decoded and checked.

import (
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"
)

// Profile is one [profile.NAME] table.
type Profile struct {
	Name string `toml:"-"`
	// Backends are the backends the view has; nil: all of them.
	Backends []string `toml:"backends"`
	// Tools, when not nil, keeps only the tools whose exposed names (with
	// the backend's prefix) match one of these globs; ExcludeTools then
	// hides those matching any of its globs (exclude wins).
	Tools        []string `toml:"tools"`
	ExcludeTools []string `toml:"exclude_tools"`
	// ToolList and ToolListMax override [mux]'s for the profile's agents
	// ("" and 0: [mux]'s).
	ToolList    string `toml:"tool_list"`
	ToolListMax int    `toml:"tool_list_max"`
	// Clients are globs on the clientInfo name (case-insensitive) of the
	// agents that get this profile when they ask for none.
	Clients []string `toml:"clients"`

	// Line is where its [profile.NAME] header is (0 if unknown), and
	// PatternLines where each of its tools and exclude_tools patterns is,
	// by key ("tools", "exclude_tools") and place, for check's messages.
	Line         int              `toml:"-"`
	PatternLines map[string][]int `toml:"-"`
	// Broken, set by LoadForServing, is why the profile's table is not
	// usable as written: its agents then see nothing rather than more
	// than the user meant.
	Broken string `toml:"-"`
}

// profileNameRe is what a profile's name may be: it is a URL path segment
// and a command-line value.
var profileNameRe = backendNameRe

// perAgentMuxKeys are the [mux] keys a profile may set: those that are
// decided per agent session.
var perAgentMuxKeys = []string{"tool_list", "tool_list_max"}

// Profile returns the profile called name, if the file has one.
func (f *File) Profile(name string) (*Profile, bool) {
	for i := range f.Profiles {
		if f.Profiles[i].Name == name {
			return &f.Profiles[i], true
		}
	}
	return nil, false
}

// ProfileNames are the names of f's profiles, in file order.
func (f *File) ProfileNames() []string {
	out := make([]string, len(f.Profiles))
	for i, p := range f.Profiles {
		out[i] = p.Name
	}
	return out
}

// ProfileForClient is the first profile (in file order) whose clients
// match the clientInfo name client, if any.
func (f *File) ProfileForClient(client string) (*Profile, bool) {
	if client == "" {
		return nil, false
	}
	for i := range f.Profiles {
		if f.Profiles[i].MatchesClient(client) {
			return &f.Profiles[i], true
		}
	}
	return nil, false
}

// PatternAt is where the i-th pattern of key (tools or exclude_tools) is,
// as FILE:LINE: profile.NAME.key #N, for messages.
func (p *Profile) PatternAt(file, key string, i int) string {
	where := file
	if lines := p.PatternLines[key]; i < len(lines) && lines[i] > 0 {
		where += fmt.Sprintf(":%d", lines[i])
	} else if p.Line > 0 {
		where += fmt.Sprintf(":%d", p.Line)
	}
	return fmt.Sprintf("%s: profile.%s.%s #%d", where, fmtSeg(p.Name), key, i+1)
}

// MatchesClient reports whether one of p's clients globs matches the
// clientInfo name client, case folded.
func (p *Profile) MatchesClient(client string) bool {
	client = strings.ToLower(client)
	for _, pat := range p.Clients {
		if ok, _ := path.Match(strings.ToLower(pat), client); ok {
			return true
		}
	}
	return false
}

// HasBackend reports whether the backend called name is in p's view. A
// broken profile has none.
func (p *Profile) HasBackend(name string) bool {
	if p.Broken != "" {
		return false
	}
	return p.Backends == nil || slices.Contains(p.Backends, name)
}

// HasTool reports whether the tool the agent calls exposed, of the
// backend called backend, is in p's view.
func (p *Profile) HasTool(backend, exposed string) bool {
	if !p.HasBackend(backend) {
		return false
	}
	if p.Tools != nil && !matchAny(p.Tools, exposed) {
		return false
	}
	return !matchAny(p.ExcludeTools, exposed)
}

func matchAny(patterns []string, name string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// decodeProfiles reads the profile table: one [profile.NAME] table each.
func (p *parser) decodeProfiles(kp keyPath, v any) []Profile {
	tbl, ok := v.(map[string]any)
	if !ok {
		if isArrayOfTables(v) {
			p.add(kp, "write [profile.NAME] for each profile, not [[profile]]")
		} else {
			p.add(kp, "expected [profile.NAME] sections, got %s", kindOf(v))
		}
		return nil
	}
	var out []Profile
	for _, name := range p.sortedKeys(kp, tbl) {
		pk := kp.child(name)
		body, ok := tbl[name].(map[string]any)
		if !ok {
			p.add(pk, "expected a table: write [profile.%s] and its keys under it, got %s", fmtSeg(name), kindOf(tbl[name]))
			continue
		}
		pr := Profile{Name: name, Line: p.lineOf(pk)}
		if !profileNameRe.MatchString(name) {
			p.add(pk, "invalid profile name %q: use only letters, digits, \"_\" and \"-\"", name)
		}
		body = p.dottedProfileNames(pk, name, body)
		present := p.decodeStruct(pk, body, reflect.ValueOf(&pr).Elem(), profileHint)
		if one, ok := body["clients"].(string); ok {
			// A mistake (reported): but the agents it names are the ones
			// the user meant, and they must get the broken profile (nothing)
			// rather than every backend.
			pr.Clients = []string{one}
		}
		if present["tool_list"] {
			p.validateToolList(pk.child("tool_list"), pr.ToolList)
		}
		if pr.ToolListMax < 0 {
			p.add(pk.child("tool_list_max"), "must not be negative (got %d)", pr.ToolListMax)
		}
		for _, f := range []struct {
			key      string
			patterns []string
			what     string
		}{{"tools", pr.Tools, "tool"}, {"exclude_tools", pr.ExcludeTools, "tool"}, {"clients", pr.Clients, "client"}} {
			for i, pat := range f.patterns {
				k := pk.child(f.key).index(i)
				if f.what == "tool" {
					if pr.PatternLines == nil {
						pr.PatternLines = map[string][]int{}
					}
					pr.PatternLines[f.key] = append(pr.PatternLines[f.key], p.lineOf(k))
				}
				if pat == "" {
					p.add(k, `empty pattern: it matches no %s name (write "*" for all)`, f.what)
				} else if _, err := path.Match(pat, ""); err != nil {
					p.add(k, `invalid glob pattern %q: use * (any characters), ? (one character), [abc] or [a-z] (one of a set; [^...] for none of it), and \ before one of these for itself`, pat)
				}
			}
		}
		out = append(out, pr)
	}
	return out
}

// dottedProfileNames reports each table in the profile name's body that
// no profile key is: [profile.Bad.Name] meant a profile "Bad.Name", and
// TOML reads it as the table Name inside the profile Bad, which "unknown
// key" would not explain. It returns body without them.
func (p *parser) dottedProfileNames(pk keyPath, name string, body map[string]any) map[string]any {
	fields := tomlFields(reflect.TypeFor[Profile]())
	var out map[string]any
	for _, k := range p.sortedKeys(pk, body) {
		if _, ok := body[k].(map[string]any); !ok {
			continue
		}
		if _, known := fields[k]; known {
			continue
		}
		msg := fmt.Sprintf("unknown key: [profile.%s.%s] is the table %q inside the profile %q, and a profile's name cannot hold a dot; name it with letters, digits, \"_\" and \"-\" only",
			fmtSeg(name), fmtSeg(k), k, name)
		if s := name + "-" + k; profileNameRe.MatchString(s) {
			msg += fmt.Sprintf(" (e.g. [profile.%s])", s)
		}
		p.add(pk.child(k), "%s", msg)
		if out == nil {
			out = maps.Clone(body)
		}
		delete(out, k)
	}
	if out == nil {
		return body
	}
	return out
}

// profileHint explains a key a profile does not take.
func profileHint(key string) string {
	if _, ok := tomlFields(reflect.TypeFor[Settings]())[key]; ok {
		return fmt.Sprintf("%q is not decided per agent: set it in [mux] (a profile may set %s)", key, strings.Join(perAgentMuxKeys, ", "))
	}
	if _, ok := tomlFields(reflect.TypeFor[Backend]())[key]; ok {
		return fmt.Sprintf("%q is a [[backend]] key; a profile has backends, tools, exclude_tools, clients, %s", key, strings.Join(perAgentMuxKeys, ", "))
	}
	return ""
}

// validateToolList checks a tool_list value at key.
func (p *parser) validateToolList(key keyPath, v string) {
	switch v {
	case "", ToolListAll, ToolListSearch, ToolListAuto:
	default:
		p.add(key, "must be %q (every tool), %q (the pinned tools, search_tools and call_tool) or %q (by agent; the default) (got %q)", ToolListAll, ToolListSearch, ToolListAuto, v)
	}
}

// validateProfiles checks what the profiles say of the rest of the file:
// backends that exist, and clients globs no two profiles share. The
// latter is a warning: the first profile in the file wins.
func (p *parser) validateProfiles(profiles []Profile, specs []Backend) []Problem {
	var known []string
	for _, s := range specs {
		if s.Name != "" {
			known = append(known, s.Name)
		}
	}
	var warns []problem
	for i, pr := range profiles {
		pk := keyPath{"profile", fmtSeg(pr.Name)}
		for j, b := range pr.Backends {
			if !slices.Contains(known, b) {
				msg := fmt.Sprintf("unknown backend %q; the backends are: %s", b, strings.Join(known, ", "))
				if s := Closest(b, known); s != "" {
					msg = fmt.Sprintf("unknown backend %q; did you mean %q?", b, s)
				}
				p.add(pk.child("backends").index(j), "%s", msg)
			}
		}
		for ci, pat := range pr.Clients {
			for _, other := range profiles[:i] {
				if o, ok := clientsOverlap(other.Clients, pat); ok {
					k := pk.child("clients").index(ci)
					warns = append(warns, problem{path: k, line: p.lineOf(k),
						message: fmt.Sprintf("clients pattern %q overlaps %q of profile %q (line %d): an agent both match gets %q, the earlier", pat, o, other.Name, other.Line, other.Name)})
					break
				}
			}
		}
	}
	return p.render(warns)
}

// clientsOverlap is the first of patterns that may match a name pat
// matches too: the same glob, or one that matches the other as written
// (a heuristic, as templatesOverlap's: "cursor*" and "cursor-nightly").
func clientsOverlap(patterns []string, pat string) (string, bool) {
	a := strings.ToLower(pat)
	for _, o := range patterns {
		b := strings.ToLower(o)
		if a == b {
			return o, true
		}
		if ok, _ := path.Match(a, b); ok {
			return o, true
		}
		if ok, _ := path.Match(b, a); ok {
			return o, true
		}
	}
	return "", false
}

// breakProfile marks the profile pr is a mistake of Broken (for
// LoadForServing), unless it names a backend the file lacks: a profile read otherwise than it was written could
// show its agents more than the user meant.
func (p *parser) breakProfile(cfg *File, pr problem) {
	if len(pr.path) < 2 || pr.path[0] != "profile" {
		return
	}
	if len(pr.path) == 3 && strings.HasPrefix(pr.path[2], "backends[") {
		return // a backend that is not there is simply not in the view
	}
	for i := range cfg.Profiles {
		if fmtSeg(cfg.Profiles[i].Name) == pr.path[1] {
			p.problems = []problem{pr}
			msg := p.finish()[0].String()
			p.problems = nil
			if cfg.Profiles[i].Broken != "" {
				msg = cfg.Profiles[i].Broken + "\n" + msg
			}
			cfg.Profiles[i].Broken = msg
		}
	}
}
