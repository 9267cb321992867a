package mux

import (
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// catalog is the merged view of tools, prompts and templates of every ready
// backend, rebuilt whenever one backend's part changes. Resources are not in
// it: they can be huge, so lists page through the backends live.
type catalog struct {
	tools      []exposed[mcp.Tool]
	prompts    []exposed[mcp.Prompt]
	templates  []exposed[mcp.ResourceTemplate]
	toolIdx    map[string]int // exposed name → index in tools
	promptIdx  map[string]int
	collisions []Collision
}

// exposed is an item as the agent sees it (tools and prompts renamed with
// the backend's prefix) and where it came from.
type exposed[T any] struct {
	item     *T // a copy, with the exposed name
	original string
	mem      *member
}

// Collision is a name (or resource URI) that two backends both offer: the
// first in config order wins, the other's item is not exposed.
type Collision struct {
	Kind   string `json:"kind"` // tool, prompt, resource
	Name   string `json:"name"`
	Winner string `json:"winner"`
	Loser  string `json:"loser"`
}

type catalogHolder struct {
	mu  sync.Mutex // serializes rebuilds
	cur atomic.Pointer[catalog]
}

func (h *catalogHolder) get() *catalog { return h.cur.Load() }

// exposedName is what the agent calls a backend's tool or prompt.
func (m *Mux) exposedName(mem *member, name string) string {
	if mem.prefix == "" {
		return name
	}
	return mem.prefix + m.cfg.Mux.ToolSeparator + name
}

func (h *catalogHolder) rebuild(m *Mux) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.cur.Load()
	c := &catalog{toolIdx: map[string]int{}, promptIdx: map[string]int{}}
	for _, mem := range m.members {
		if !mem.serving() {
			continue
		}
		part := mem.snapshot()
		for _, t := range part.tools {
			name := m.exposedName(mem, t.Name)
			if i, dup := c.toolIdx[name]; dup {
				c.collisions = append(c.collisions, Collision{"tool", name, c.tools[i].mem.spec.Name, mem.spec.Name})
				continue
			}
			cp := *t
			cp.Name = name
			c.toolIdx[name] = len(c.tools)
			c.tools = append(c.tools, exposed[mcp.Tool]{&cp, t.Name, mem})
		}
		for _, p := range part.prompts {
			name := m.exposedName(mem, p.Name)
			if i, dup := c.promptIdx[name]; dup {
				c.collisions = append(c.collisions, Collision{"prompt", name, c.prompts[i].mem.spec.Name, mem.spec.Name})
				continue
			}
			cp := *p
			cp.Name = name
			c.promptIdx[name] = len(c.prompts)
			c.prompts = append(c.prompts, exposed[mcp.Prompt]{&cp, p.Name, mem})
		}
		for _, t := range part.templates {
			c.templates = append(c.templates, exposed[mcp.ResourceTemplate]{t, t.URITemplate, mem})
		}
	}
	for _, col := range c.collisions {
		if old == nil || !hasCollision(old.collisions, col) {
			m.log.Warn("name collision: the first backend in config order wins", "kind", col.Kind, "name", col.Name, "winner", col.Winner, "loser", col.Loser)
		}
	}
	h.cur.Store(c)
}

func hasCollision(list []Collision, c Collision) bool {
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

// resourceCollisions lists URIs that more than one backend lists.
func (m *Mux) resourceCollisions() []Collision {
	var out []Collision
	owner := map[string]string{}
	for _, mem := range m.members {
		part := mem.snapshot()
		for u := range part.uris {
			if w, ok := owner[u]; ok {
				out = append(out, Collision{"resource", u, w, mem.spec.Name})
				continue
			}
			owner[u] = mem.spec.Name
		}
	}
	return out
}
