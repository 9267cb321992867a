package mux

import (
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/mux/catalogmem"
)

// A backend may list to a client what depends on that client's
// capabilities (server-everything lists its sampling tool only to a client
// with sampling), so a catalog is remembered for each set of capabilities
// its backend was told (catalogmem.Shape), and listed from memory only to
// an agent for whom mux declares the same: the agent gets what the
// backend would list to it. mux declares to a backend the capabilities of
// the first agent session (clientreq.go), so the memory is looked up
// before any agent with the catalog seen last, and settled when the first
// one initializes: the catalog for its capabilities if one is remembered,
// else the backend starts, and the first list waits for it as for a
// backend never seen.

// holdRest reports whether mem, going to rest with a remembered catalog,
// must wait for the agent's capabilities before its catalog is the one to
// list (it is then pending); false once they are known, or when no agent
// will come.
func (a *agentState) holdRest(mem *member) bool {
	a.init()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.known || a.wait < 0 {
		return false
	}
	a.pending = append(a.pending, mem)
	return true
}

// declaredShape is what of the capabilities mux declares to a backend
// starting now may shape its catalog, once the first agent's are known.
func (a *agentState) declaredShape() (json.RawMessage, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.known {
		return nil, false
	}
	return catalogmem.Shape(a.caps), true
}

// settleRest makes the catalog each pending member lists the one taken
// for caps, the capabilities mux now declares: already, or remembered
// (swapped in), or the backend's own, which it starts for. Each is then
// started as far as the first list is concerned, but for those starting;
// after the rebuild, so that no list sees a swapped one's old catalog.
func (m *Mux) settleRest(pending []*member, caps json.RawMessage) {
	var settled, wake []*member
	for _, mem := range pending {
		mem.mu.Lock()
		state, restCaps := mem.state, mem.restCaps
		mem.mu.Unlock()
		if state != stateRemembered || catalogmem.SameJSON(restCaps, caps) {
			mem.markStarted()
			continue
		}
		if e, ok := recall(m.catalogs, memoryIDs(mem.specNow(), m.runDir())[:1], caps); ok && e.Failure == nil {
			mem.listFromMemory(e)
			settled = append(settled, mem)
			continue
		}
		mem.log.Info("starting it: its catalog is remembered for clients of other capabilities than the agent's, which may change what it lists",
			"remembered_for", string(restCaps), "agent", string(caps))
		mem.mu.Lock()
		mem.known, mem.cat, mem.restCaps = false, memberCatalog{}, nil
		mem.mu.Unlock()
		wake = append(wake, mem)
	}
	if len(settled)+len(wake) == 0 {
		return
	}
	m.cat.rebuild(m)
	m.builtinChanged(uriBackends)
	for _, mem := range settled {
		mem.markStarted()
	}
	for _, mem := range wake {
		select {
		case mem.use <- struct{}{}:
		default:
		}
	}
}
