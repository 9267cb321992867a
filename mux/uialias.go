package mux

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// ui:// URIs that two backends both offer. An MCP App's tool points at its
// UI with _meta.ui.resourceUri, a ui:// resource its server serves; two
// servers often use the same URI (the ext-apps examples all serve
// ui://get-time/mcp-app.html). A URI belongs to the first backend in config
// order, so the other's tool would show the first one's app. For ui://
// URIs the collision is fixed instead: the later backend's URI gets a form
// of its own, ui://<prefix>__<the rest> (its name when it has no prefix),
// in its tools, its resource lists and reads, and back to the original on
// the way to the backend. The first backend's URI, and every ui:// URI no
// other backend offers, stay as they are.

const uiScheme = "ui://"

// uiAliases are the per-backend forms of colliding ui:// URIs in one
// catalog.
type uiAliases struct {
	byMember map[*member]map[string]string // the later backend → its URI → its own form
	target   map[string]uiTarget           // its own form → whose, and the URI there
}

type uiTarget struct {
	mem *member
	uri string
}

// alias is the form the agent sees of mem's uri: uri itself unless it
// collides.
func (a *uiAliases) alias(mem *member, uri string) string {
	if a == nil {
		return uri
	}
	if s, ok := a.byMember[mem][uri]; ok {
		return s
	}
	return uri
}

// buildUIAliases gives the ui:// URIs of each serving backend (listed, or
// pointed at by one of its tools) that an earlier one also has a form of
// their own.
func buildUIAliases(members []*member) *uiAliases {
	a := &uiAliases{byMember: map[*member]map[string]string{}, target: map[string]uiTarget{}}
	first := map[string]*member{}
	for _, mem := range members {
		if !mem.listed() {
			continue
		}
		for _, uri := range mem.uiURIs() {
			if owner, taken := first[uri]; !taken || owner == mem {
				first[uri] = mem
				continue
			}
			own := uiScheme + mem.aliasPrefix() + "__" + strings.TrimPrefix(uri, uiScheme)
			if a.byMember[mem] == nil {
				a.byMember[mem] = map[string]string{}
			}
			a.byMember[mem][uri] = own
			a.target[own] = uiTarget{mem, uri}
		}
	}
	return a
}

// aliasPrefix is what the member's own ui:// URIs start with: its prefix,
// or its name when it has none.
func (mem *member) aliasPrefix() string {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if mem.prefix != "" {
		return mem.prefix
	}
	return mem.spec.Name
}

// uiURIs are the ui:// URIs the backend lists and its tools point at, in a
// stable order.
func (mem *member) uiURIs() []string {
	part := mem.snapshot()
	var out []string
	seen := map[string]bool{}
	add := func(u string) {
		if strings.HasPrefix(u, uiScheme) && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for i := range part.tools {
		add(toolUIResource(part.rawAt(0, i)))
	}
	var listed []string
	for u := range part.uris {
		listed = append(listed, u)
	}
	slices.Sort(listed)
	for _, u := range listed {
		add(u)
	}
	return out
}

// toolUIResource is the _meta.ui.resourceUri of a tool as sent, or "".
func toolUIResource(raw json.RawMessage) string {
	meta, ok := wire.ObjectMember(raw, "_meta")
	if !ok || meta == nil {
		return ""
	}
	ui, ok := wire.ObjectMember(meta, "ui")
	if !ok || ui == nil {
		return ""
	}
	v, ok := wire.ObjectMember(ui, "resourceUri")
	if !ok || v == nil {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// withUIAliases is raw (an item or result as mem's backend sent it) with
// every string that is one of mem's colliding ui:// URIs in its own form.
func (a *uiAliases) withUIAliases(mem *member, raw json.RawMessage) json.RawMessage {
	if a == nil || len(a.byMember[mem]) == 0 || !bytes.Contains(raw, []byte(uiScheme)) {
		return raw
	}
	for uri, own := range a.byMember[mem] {
		raw = bytes.ReplaceAll(raw, []byte(strconv.Quote(uri)), []byte(strconv.Quote(own)))
	}
	return raw
}

// withoutUIAlias is raw (a result of mem's backend for the agent's request
// of exposed, which is the backend's uri) with uri in the agent's form.
func withUIAlias(raw json.RawMessage, uri, exposed string) json.RawMessage {
	if uri == exposed {
		return raw
	}
	return bytes.ReplaceAll(raw, []byte(strconv.Quote(uri)), []byte(strconv.Quote(exposed)))
}
