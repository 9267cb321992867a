package config

// Tool overrides: [[backend.override]] entries, which change the name,
// title, description or annotations the agent sees of one of a backend's
// tools (mux applies them when it merges the catalogs: mux/override).
// What can be checked without the backend is checked here; an override of
// a tool the backend does not offer is for check --connect to say.

// MaxNameLength is the longest tool or prompt name several agents and LLM
// APIs accept (Claude's and OpenAI's tool names: ^[a-zA-Z0-9_-]{1,64}$).
const MaxNameLength = 64

// ToolOverride is one [[backend.override]]. What is left out stays the
// backend's.
type ToolOverride struct {
	// Tool is the backend's own name of the tool (before the prefix).
	Tool string `toml:"tool"`
	// Name, when set, is exposed instead (with the prefix); a call of it
	// reaches the backend as Tool.
	Name        string `toml:"name"`
	Title       string `toml:"title"`
	Description string `toml:"description"`
	// Annotations set here replace the backend's; the others stay.
	Annotations *ToolHints `toml:"annotations"`
}

// ToolHints are the MCP ToolAnnotations fields an override may set; nil
// leaves the backend's.
type ToolHints struct {
	Title           *string `toml:"title"`
	ReadOnlyHint    *bool   `toml:"readOnlyHint"`
	DestructiveHint *bool   `toml:"destructiveHint"`
	IdempotentHint  *bool   `toml:"idempotentHint"`
	OpenWorldHint   *bool   `toml:"openWorldHint"`
}

// Shown is the name before the prefix the agent sees of a tool the
// backend calls own: its override's name, or own.
func (b *Backend) Shown(own string) string {
	for _, o := range b.Overrides {
		if o.Tool == own && o.Name != "" {
			return o.Name
		}
	}
	return own
}

// validateOverrides checks s's overrides: each names a tool once, and the
// names they expose are valid and distinct. An entry whose keys were
// reported already (a wrong type, an unknown key) is not judged further.
// Disabled backends are checked too, as filters are.
func (p *parser) validateOverrides(bp keyPath, s *Backend, sep string) {
	type seen struct {
		at   int // its index in Overrides
		line int
	}
	tools := map[string]seen{}
	names := map[string]seen{} // exposed name before the prefix → its override
	s.OverrideLines = make([]int, len(s.Overrides))
	for i, o := range s.Overrides {
		k := keyPath{bp[0]}.child("override").index(i)
		s.OverrideLines[i] = p.lineOf(k)
		if p.reportedUnder(k) {
			continue
		}
		set := func(key string) bool { _, ok := p.lines[k.child(key).String()]; return ok }
		switch {
		case o.Tool == "" && !set("tool"):
			p.add(k, "missing tool: every [[backend.override]] needs tool = \"NAME\", the backend's own name of the tool it changes")
			continue
		case o.Tool == "":
			p.add(k.child("tool"), "must not be empty: write the backend's own name of the tool")
			continue
		}
		if first, dup := tools[o.Tool]; dup {
			p.add(k.child("tool"), "tool %q is overridden already (override #%d, line %d): put its changes in one [[backend.override]]", o.Tool, first.at+1, first.line)
			continue
		}
		tools[o.Tool] = seen{i, p.lineOf(k)}
		for _, f := range []struct{ key, v string }{{"name", o.Name}, {"title", o.Title}, {"description", o.Description}} {
			if f.v == "" && set(f.key) {
				p.add(k.child(f.key), "must not be empty (remove the key to keep the tool's own %s)", f.key)
			}
		}
		shown, key := o.Tool, "tool"
		if o.Name != "" {
			shown, key = o.Name, "name"
			if !backendNameRe.MatchString(o.Name) {
				p.add(k.child("name"), "invalid tool name %q: use only letters, digits, \"_\" and \"-\" (what agents accept)", o.Name)
				continue
			}
			exposed := o.Name
			if pre := s.EffectivePrefix(); pre != "" {
				exposed = pre + sep + o.Name
			}
			if len(exposed) > MaxNameLength {
				p.add(k.child("name"), "the agent would see %q, %d characters, over the %d that several agents and LLM APIs accept: choose a shorter name", exposed, len(exposed), MaxNameLength)
			}
		}
		if first, dup := names[shown]; dup {
			p.add(k.child(key), "tool %q of override #%d (line %d) is exposed as %q already: two tools cannot share a name", s.Overrides[first.at].Tool, first.at+1, first.line, shown)
			continue
		}
		names[shown] = seen{i, p.lineOf(k)}
	}
}

// reportedUnder reports whether a problem was recorded at k or a key
// within it.
func (p *parser) reportedUnder(k keyPath) bool {
	for _, pr := range p.problems {
		if len(pr.path) >= len(k) && pr.path[:len(k)].String() == k.String() {
			return true
		}
	}
	return false
}

// addEarly reports, and says so, when a table within a backend (most
// often [[backend.override]]) comes before the first [[backend]]: TOML's
// own error for it is on the [[backend]] line, about "backend" being
// "already created", and says nothing of the table that caused it.
func (p *parser) addEarly() bool {
	e := p.scan.early
	if e.line == 0 {
		return false
	}
	what := "it is for"
	if e.header == "[[backend.override]]" {
		what = "whose tool it overrides"
	}
	p.addAt(nil, e.line, "%s comes before any [[backend]]: it belongs after the [[backend]] %s (move it below that backend's keys)", e.header, what)
	return true
}
