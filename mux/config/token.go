package config

// Tokens: [[token]] tables, one bearer token per member of a team that
// shares one `serve --http`, each bound to the profiles it may use. The
// HTTP door (mux/door) checks them; here they are decoded and checked, as
// http_token is: a token asked for but not usable is never "no token".

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// Token is one [[token]] table.
type Token struct {
	// Name is what the audit log, the metrics and status show of the
	// token: never its value.
	Name string `toml:"name"`
	// Value is the token, its ${VAR} expanded. Never shown.
	Value string `toml:"value"`
	// Profiles are the views the token may use, the first its view at
	// /mcp; nil: every view, as http_token.
	Profiles []string `toml:"profiles"`

	// Line is where its [[token]] header is (0 if unknown).
	Line int `toml:"-"`
}

// Allows reports whether t may use the profile called name ("" for every
// backend, /mcp without a profile).
func (t *Token) Allows(name string) bool {
	return t.Profiles == nil || name != "" && slices.Contains(t.Profiles, name)
}

type tokenEntry struct {
	path    keyPath // token[i]
	token   Token
	present map[string]bool
}

var tokenSegRe = regexp.MustCompile(`^token\[([0-9]+)\]$`)

// decodeTokens reads the [[token]] tables as written; validateTokens
// checks them once the rest of the file is known.
func (p *parser) decodeTokens(kp keyPath, v any) []tokenEntry {
	elems := p.arrayOfTables(kp, v, "token", nil)
	var out []tokenEntry
	for i, e := range elems {
		tp := kp.index(i)
		tbl, ok := e.(map[string]any)
		if !ok {
			p.add(tp, "expected a table, got %s", kindOf(e))
			continue
		}
		te := tokenEntry{path: tp}
		te.present = p.decodeStruct(tp, tbl, reflect.ValueOf(&te.token).Elem(), tokenHint)
		te.token.Line = p.lineOf(tp)
		if backendNameRe.MatchString(te.token.Name) {
			p.tokenNames[i] = te.token.Name
		}
		out = append(out, te)
	}
	return out
}

// tokenHint explains a key a [[token]] does not take.
func tokenHint(key string) string {
	return fmt.Sprintf("%q is not a [[token]] key; a token has name, value and profiles", key)
}

// validateTokens checks the tokens: a name of their own, a value that
// expands (never shown, nor the same as another's), and profiles the file
// has.
func (p *parser) validateTokens(entries []tokenEntry, cfg *File) []Token {
	profiles := cfg.ProfileNames()
	type seen struct {
		name string
		line int
	}
	byName := map[string]int{} // → its place in entries
	byValue := map[string]seen{}
	out := make([]Token, 0, len(entries))
	for i, e := range entries {
		t := e.token
		k := func(name string) keyPath { return append(keyPath{e.path[0]}, name) }

		_, hasName := e.present["name"]
		switch {
		case !hasName:
			p.add(k("name"), "missing: every [[token]] needs a name (what the audit log, the metrics and status show of it)")
		case !e.present["name"]: // wrong type, reported already
		case !backendNameRe.MatchString(t.Name):
			p.add(k("name"), "invalid name %q: use only letters, digits, \"_\" and \"-\"", t.Name)
		default:
			if j, dup := byName[t.Name]; dup {
				p.add(k("name"), "duplicate token name %q (already used by token #%d at line %d)", t.Name, j+1, entries[j].token.Line)
			} else {
				byName[t.Name] = i
			}
		}

		if _, hasValue := e.present["value"]; !hasValue {
			p.add(k("value"), `missing: every [[token]] needs a value, e.g. value = "${MCP_MUX_TOKEN_%s}" with it set in the environment mcp-mux is started with`, strings.ToUpper(strings.ReplaceAll(t.Name, "-", "_")))
		} else if e.present["value"] {
			before := len(p.problems)
			t.Value = p.expandToken(k("value"), t.Value, "remove this [[token]]")
			if len(p.problems) == before {
				switch first, dup := byValue[t.Value]; {
				case t.Value == cfg.Mux.HTTPToken:
					p.add(k("value"), "the same value as [mux] http_token: a member's token must be its own (http_token is the key to every view)")
				case dup:
					p.add(k("value"), "the same value as token %q (line %d): each token must be its own, or the audit log could not tell them apart", first.name, first.line)
				default:
					byValue[t.Value] = seen{t.Name, t.Line}
				}
			}
		}

		if e.present["profiles"] && len(t.Profiles) == 0 {
			p.add(k("profiles"), "empty: the token could use no view; name its profiles, or remove the key for every view")
		}
		for j, name := range t.Profiles {
			if slices.Contains(profiles, name) {
				continue
			}
			msg := fmt.Sprintf("unknown profile %q; the profiles are: %s", name, strings.Join(profiles, ", "))
			if len(profiles) == 0 {
				msg = fmt.Sprintf("unknown profile %q: the file has no [profile.NAME] (add [profile.%s], or remove the key for every view)", name, fmtSeg(name))
			} else if s := Closest(name, profiles); s != "" {
				msg = fmt.Sprintf("unknown profile %q; did you mean %q?", name, s)
			}
			p.add(k("profiles").index(j), "%s", msg)
		}
		out = append(out, t)
	}
	return out
}

// Token is the [[token]] called name, if the file has one.
func (f *File) Token(name string) (*Token, bool) {
	for i := range f.Tokens {
		if f.Tokens[i].Name == name {
			return &f.Tokens[i], true
		}
	}
	return nil, false
}
