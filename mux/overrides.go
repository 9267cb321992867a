package mux

// Tool overrides ([[backend.override]]) as the catalog applies them: at
// every rebuild, from each member's config, over the tools the backend
// listed (mux/override), as the filters are (filters.go). So a reload that
// changes only overrides takes effect at once, without asking the backend
// again, and what mux remembers of a backend (lazy.go) is what the backend
// offered, whatever overrides say.
//
// The filters and pin see a tool's own name, the one its backend gives
// it; everything the agent sees (the lists, search_tools, the wrappers'
// annotations, the names it calls) is the overridden tool. A call of an
// overridden name reaches the backend under the tool's own name: the
// catalog's original, which every path (route.go, passthrough.go,
// http.go) calls it by.

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// overrides returns the member's tool overrides by the tool's own name. A
// reload may change them while a rebuild runs, hence the lock.
func (mem *member) overrides() map[string]config.ToolOverride {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if len(mem.spec.Overrides) == 0 {
		return nil
	}
	out := make(map[string]config.ToolOverride, len(mem.spec.Overrides))
	for _, o := range mem.spec.Overrides {
		out[o.Tool] = o
	}
	return out
}

// overrideWarnings is what `check --connect` says of the overrides of
// each ready backend, naming FILE:LINE of the entry: one of a tool the
// backend does not list (serving ignores it), and one whose name is also
// a tool of the backend's own (the first in the backend's list keeps it).
func (m *Mux) overrideWarnings() []string {
	var out []string
	path := m.cfg.Path
	for _, mem := range m.members() {
		if !mem.serving() {
			continue // its lists are unknown: nothing can be said
		}
		part := mem.snapshot()
		mem.mu.Lock()
		spec := mem.spec
		mem.mu.Unlock()
		if len(spec.Overrides) == 0 {
			continue
		}
		tools, _ := mem.filters()
		for i, o := range spec.Overrides {
			where := path
			if i < len(spec.OverrideLines) && spec.OverrideLines[i] > 0 {
				where = fmt.Sprintf("%s:%d", path, spec.OverrideLines[i])
			}
			if !listsTool(part.tools, o.Tool) {
				out = append(out, fmt.Sprintf("%s: backend %q: override of tool %q: the backend lists no tool of that name (it lists %d), so the override changes nothing", where, spec.Name, o.Tool, len(part.tools)))
				continue
			}
			if o.Name == "" || o.Name == o.Tool {
				continue
			}
			for _, t := range part.tools {
				if t.Name != o.Tool && spec.Shown(t.Name) == o.Name && tools.admits(t.Name) && tools.admits(o.Tool) {
					out = append(out, fmt.Sprintf("%s: backend %q: override of tool %q: its name %q is also the name of one of the backend's own tools, and the first of the two in the backend's list hides the other: choose another name", where, spec.Name, o.Tool, o.Name))
					break
				}
			}
		}
	}
	return out
}

func listsTool(tools []*mcp.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}
