package mux

// Tool names that fit the agent (mux/toolname): an agent with a known name
// limit (mux/agents) sees the catalog with each tool whose name would pass
// it renamed, as a view of its own (profile.go), so that every path that
// resolves a name the agent sends (route.go, passthrough.go, wrappers.go,
// toolsearch.go) resolves the session's names, and those that list (lists.go,
// toolsearch.go) show them. The merged catalog keeps the full names: what
// profiles' and filters' globs match, what search indexes, and what an
// agent whose limit is not known sees. A renamed tool answers to its full
// name too: it is longer than any name that fits, so it is no other's.

import (
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/agents"
	"github.com/mcp-mux/mcp-mux/mux/toolname"
)

// DefaultName is the name an agent is assumed to have registered mcp-mux
// under: what import --apply writes and the README shows.
const DefaultName = "mcp-mux"

// WithName is the name the agents registered mcp-mux under, where it is
// not DefaultName (mcp-mux --name): it is part of the names they give
// their models, so it counts toward their limits.
func WithName(name string) Option {
	return func(m *Mux) { m.name = name }
}

// fitter is the tool names of one agent with a name limit, for the
// catalog now.
type fitter struct {
	agent  agents.Agent
	server string // the name the agent registered mcp-mux under
	cur    atomic.Pointer[fitted]
}

// fitted is the renames of a catalog: full name to the agent's.
type fitted struct {
	base    *catalog
	renames map[string]string
}

// noFitter is a session's fitter when its agent's names need none.
var noFitter = &fitter{}

// newFitters is a fitter for each known agent with a name limit, by name.
func newFitters(server string) map[string]*fitter {
	out := map[string]*fitter{}
	for _, a := range agents.Known {
		if a.NameLimit > 0 && a.ToolName != nil {
			out[a.Name] = &fitter{agent: a, server: server}
		}
	}
	return out
}

// ownTools are the names of mux's own tools: no tool of a backend is
// renamed to one of them.
var ownTools = []string{toolSearch, toolCall, toolCallReadOnly}

// renames is what the agent's names of base's tools are where they are
// not the full names (nil: none), made once per catalog.
func (f *fitter) renames(base *catalog) map[string]string {
	if c := f.cur.Load(); c != nil && c.base == base {
		return c.renames
	}
	names := make([]toolname.Name, len(base.tools.items))
	for i, e := range base.tools.items {
		names[i] = toolname.Split(e.item.Name, e.bare, base.sep)
	}
	r := toolname.Fit(f.agent, f.server, names, base.prefixes, ownTools)
	f.cur.Store(&fitted{base, r})
	return r
}

// fitterOf is the fitter of the agent of s: nil for one whose names need
// none (no known limit), or not known yet. It is decided at the first
// request that says what the agent is, once for the session.
func (m *Mux) fitterOf(s *session) *fitter {
	if s == nil {
		return nil
	}
	f := s.fit.Load()
	if f == nil {
		p := s.initParams()
		if p == nil {
			return nil
		}
		f = noFitter
		if p.ClientInfo != nil {
			if known := m.fitters[agents.Of(p.ClientInfo.Name).Name]; known != nil {
				f = known
			}
		}
		s.fit.CompareAndSwap(nil, f)
		f = s.fit.Load()
	}
	if f == noFitter {
		return nil
	}
	return f
}

// withRenames is c with its tools renamed as renames says, each also
// found by its full name.
func (c *catalog) withRenames(renames map[string]string) *catalog {
	out := *c
	out.tools = named[mcp.Tool]{}
	for _, e := range c.tools.items {
		if short, ok := renames[e.item.Name]; ok {
			cp := *e.item
			cp.Name = short
			e.item, e.raw = &cp, renamed(e.raw, short, &cp)
		}
		out.tools.add(e.item.Name, e)
		if e.full != e.item.Name {
			out.tools.idx[e.full] = len(out.tools.items) - 1
		}
	}
	return &out
}
