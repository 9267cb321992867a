package clientimport

// The mcp-mux config that `import --apply` writes, or adds to: the
// backends of the servers it moves (those the config already has, the
// same, are not added twice) and a [profile.NAME] table per client file
// (and project) whose servers moved, which that client's entry asks for
// with --profile NAME. A profile already there is added to, not written
// twice, so that a second run changes nothing.

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Profile is a [profile.NAME] table.
type Profile struct {
	Name     string
	About    string // a comment above it: whose servers these are
	Backends []string
	Clients  []string // clientInfo names (globs) that get it by default
}

// Existing is what --apply needs of the config it adds to.
type Existing struct {
	Names    []string                  // its backends' names
	backends map[string]map[string]any // name → its [[backend]] table
	Profiles map[string]*Profile       // its [profile.NAME] tables
}

// ReadExisting reads the config at path (data) for --apply: it must be
// TOML, and is read as written (no ${VAR} is expanded).
func ReadExisting(path string, data []byte) (*Existing, error) {
	var doc struct {
		Backend []map[string]any          `toml:"backend"`
		Profile map[string]map[string]any `toml:"profile"`
	}
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ex := &Existing{backends: map[string]map[string]any{}, Profiles: map[string]*Profile{}}
	for _, b := range doc.Backend {
		name, _ := b["name"].(string)
		if name == "" {
			continue
		}
		ex.Names = append(ex.Names, name)
		ex.backends[name] = b
	}
	for name, t := range doc.Profile {
		p := &Profile{Name: name}
		if list, ok := t["backends"].([]any); ok {
			p.Backends = []string{}
			for _, b := range list {
				if s, ok := b.(string); ok {
					p.Backends = append(p.Backends, s)
				}
			}
		}
		ex.Profiles[name] = p
	}
	return ex, nil
}

// SameBackends maps each backend of res to a backend of ex with the same
// table but for its name: the server is there already.
func (ex *Existing) SameBackends(res *Result) map[string]string {
	var doc struct {
		Backend []map[string]any `toml:"backend"`
	}
	out := map[string]string{}
	if _, err := toml.Decode(string(res.TOML), &doc); err != nil {
		return out
	}
	for _, b := range doc.Backend {
		name, _ := b["name"].(string)
		for _, old := range ex.Names {
			if sameBackend(b, ex.backends[old]) {
				out[name] = old
				break
			}
		}
	}
	return out
}

func sameBackend(a, b map[string]any) bool {
	strip := func(m map[string]any) map[string]any {
		c := make(map[string]any, len(m))
		for k, v := range m {
			if k != "name" {
				c[k] = v
			}
		}
		return c
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

// AddToConfig is the config data (nil: none yet) with backends (a rendered
// config, possibly empty) added at its end and profiles added: a profile
// ex has already gets the backends it lacks in its backends line; a new
// one is a table at the end. It also says what changed, per profile.
func AddToConfig(data, backends []byte, profiles []Profile, ex *Existing) ([]byte, []string, error) {
	out := slices.Clone(data)
	var said []string
	if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	if len(backends) > 0 {
		if len(out) > 0 {
			out = append(out, '\n')
		}
		out = append(out, backends...)
	}
	for _, p := range profiles {
		old := ex.Profiles[p.Name]
		if old == nil {
			var b strings.Builder
			b.WriteString("\n")
			if p.About != "" {
				b.WriteString("# " + commentSafe(p.About) + "\n")
			}
			fmt.Fprintf(&b, "[profile.%s]\nbackends = %s\n", p.Name, tomlArray(p.Backends))
			if len(p.Clients) > 0 {
				fmt.Fprintf(&b, "clients = %s\n", tomlArray(p.Clients))
			}
			out = append(out, b.String()...)
			said = append(said, fmt.Sprintf("profile %s added: %s", p.Name, strings.Join(p.Backends, ", ")))
			continue
		}
		if old.Backends == nil {
			continue // it has every backend
		}
		var missing []string
		for _, b := range p.Backends {
			if !slices.Contains(old.Backends, b) && !slices.Contains(missing, b) {
				missing = append(missing, b)
			}
		}
		if len(missing) == 0 {
			continue
		}
		var err error
		out, err = setProfileBackends(out, p.Name, append(slices.Clone(old.Backends), missing...))
		if err != nil {
			return nil, nil, fmt.Errorf("profile %s: %w; add %s to its backends by hand", p.Name, err, strings.Join(missing, ", "))
		}
		said = append(said, fmt.Sprintf("profile %s: added %s", p.Name, strings.Join(missing, ", ")))
	}
	var check map[string]any
	if _, err := toml.Decode(string(out), &check); err != nil {
		return nil, nil, fmt.Errorf("the config would not parse after adding to it: %w", err)
	}
	return out, said, nil
}

var tableHeaderRe = regexp.MustCompile(`^\s*\[`)

// setProfileBackends rewrites the backends line of the [profile.name]
// table of data to list backends. The line must hold the whole list.
func setProfileBackends(data []byte, name string, backends []string) ([]byte, error) {
	header := regexp.MustCompile(`^\s*\[\s*profile\s*\.\s*("` + regexp.QuoteMeta(name) + `"|'` + regexp.QuoteMeta(name) + `'|` + regexp.QuoteMeta(name) + `)\s*\]\s*(#.*)?$`)
	backendsRe := regexp.MustCompile(`^(\s*)backends\s*=`)
	lines := bytes.SplitAfter(data, []byte("\n"))
	in := false
	for i, line := range lines {
		text := strings.TrimRight(string(line), "\r\n")
		switch {
		case header.MatchString(text):
			in = true
			continue
		case tableHeaderRe.MatchString(text):
			in = false
			continue
		}
		m := backendsRe.FindStringSubmatch(text)
		if !in || m == nil {
			continue
		}
		// The list ends at the first "]" up to which the line parses;
		// what follows (a comment) stays.
		for j := range len(text) {
			var one struct{ Backends []string }
			if text[j] != ']' {
				continue
			}
			if _, err := toml.Decode(text[:j+1], &one); err == nil {
				lines[i] = []byte(m[1] + "backends = " + tomlArray(backends) + string(line[j+1:]))
				return bytes.Join(lines, nil), nil
			}
		}
		return nil, fmt.Errorf("its backends list is not on one line")
	}
	return nil, fmt.Errorf("its backends line was not found under [profile.%s]", name)
}
