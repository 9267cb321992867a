package mux

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// pageSize bounds the items of one page of the lists mux serves from its
// merged catalog (tools, prompts, templates).
const pageSize = 100

// cursor is where the next page starts. It is opaque to the agent
// (base64 of JSON) and validated on the way back in.
type cursor struct {
	Kind    string `json:"k"`
	Backend string `json:"b,omitempty"` // resources: whose page comes next
	Cursor  string `json:"c,omitempty"` // resources: that backend's own cursor
	Offset  int    `json:"o,omitempty"` // catalog lists: index in the merged list
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor parses s for a list of kind. "" is the first page.
func decodeCursor(s, kind string) (cursor, error) {
	c := cursor{Kind: kind}
	if s == "" {
		return c, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(raw, &c)
	}
	if err == nil && (c.Kind != kind || c.Offset < 0) {
		err = fmt.Errorf("cursor is for another list")
	}
	if err != nil {
		return cursor{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid cursor %q", s)}
	}
	return c, nil
}

// page returns the page of a catalog list that starts at cursor s: its
// items, the same as their backends sent them, and the next cursor.
func page[T any](items []exposed[T], s, kind string) ([]*T, []json.RawMessage, string, error) {
	part, next, err := pageOf(items, s, kind)
	if err != nil {
		return nil, nil, "", err
	}
	out := make([]*T, 0, len(part))
	raw := make([]json.RawMessage, 0, len(part))
	for _, e := range part {
		out = append(out, e.item)
		raw = append(raw, e.raw)
	}
	return out, raw, next, nil
}

// pageOf is the part of items on the page at cursor s, and the next cursor.
func pageOf[T any](items []exposed[T], s, kind string) ([]exposed[T], string, error) {
	c, err := decodeCursor(s, kind)
	if err != nil {
		return nil, "", err
	}
	if c.Offset > len(items) {
		return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid cursor %q: past the end of the list", s)}
	}
	end := min(c.Offset+pageSize, len(items))
	next := ""
	if end < len(items) {
		next = cursor{Kind: kind, Offset: end}.encode()
	}
	return items[c.Offset:end], next, nil
}

// listTools is the session's tool list: every tool, or the search surface
// (toolsearch.go).
func (m *Mux) listTools(ctx context.Context, p *mcp.ListToolsParams) (mcp.Result, error) {
	m.waitStarted(ctx)
	s := sessionFrom(ctx)
	if m.toolListMode(s) == config.ToolListSearch {
		if paramsCursor(p) != "" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid cursor %q: the list has one page", paramsCursor(p))}
		}
		return m.searchSurface(s)
	}
	cat := m.catalogFor(s)
	part, next, err := pageOf(cat.tools.items, paramsCursor(p), "tools")
	if err != nil {
		return nil, err
	}
	items := make([]*mcp.Tool, len(part))
	raw := make([]json.RawMessage, len(part))
	for i, e := range part {
		items[i], raw[i] = e.item, e.raw
	}
	if traitsOf(s).Searches {
		raw = forClaudeCode(part, raw)
	}
	return &toolsPage{&mcp.ListToolsResult{Tools: items, NextCursor: next, Cacheable: cat.cache[0]}, raw}, nil
}

func (m *Mux) listPrompts(ctx context.Context, p *mcp.ListPromptsParams) (mcp.Result, error) {
	m.waitStarted(ctx)
	cat := m.catalogFor(sessionFrom(ctx))
	items, raw, next, err := page(cat.prompts.items, paramsCursor(p), "prompts")
	if err != nil {
		return nil, err
	}
	return &promptsPage{&mcp.ListPromptsResult{Prompts: items, NextCursor: next, Cacheable: cat.cache[1]}, raw}, nil
}

func (m *Mux) listTemplates(ctx context.Context, p *mcp.ListResourceTemplatesParams) (mcp.Result, error) {
	m.waitStarted(ctx)
	cat := m.catalogFor(sessionFrom(ctx))
	items, raw, next, err := page(cat.templates, paramsCursor(p), "templates")
	if err != nil {
		return nil, err
	}
	return &templatesPage{&mcp.ListResourceTemplatesResult{ResourceTemplates: items, NextCursor: next, Cacheable: cat.cache[2]}, raw}, nil
}

// nextWithResources is the first of members that can list resources now,
// and its backend.
func nextWithResources(members []*member) (*member, *backends.Backend) {
	for _, mem := range members {
		if b, err := mem.backend(); err == nil && b.Capabilities().Resources != nil {
			return mem, b
		}
		if mem.resourcesAtRest() != nil {
			return mem, nil // listed from what it listed last (lazy.go)
		}
	}
	return nil, nil
}

// servingMembers are those of members that are serving now.
func servingMembers(members []*member) []*member {
	var out []*member
	for _, mem := range members {
		if mem.listed() {
			out = append(out, mem)
		}
	}
	return out
}

// unclaimed clears keep[i] for each uris[i] that one of earlier (the
// serving backends before the one listing uris) claims, and so owns. A
// member's lock is taken once per batch of URIs, not once per URI, and
// never held for a whole page.
func unclaimed(earlier []*member, uris []string, keep []bool) {
	const batch = 256
	for _, other := range earlier {
		for start := 0; start < len(uris); start += batch {
			end := min(start+batch, len(uris))
			other.mu.Lock()
			for i := start; i < end; i++ {
				if keep[i] && other.claimsLocked(uris[i]) {
					keep[i] = false
				}
			}
			other.mu.Unlock()
		}
	}
}

// paramsCursor reads the cursor of any list request's params, which may be nil.
func paramsCursor[P interface {
	*mcp.ListToolsParams | *mcp.ListPromptsParams | *mcp.ListResourcesParams | *mcp.ListResourceTemplatesParams
}](p P) string {
	switch p := any(p).(type) {
	case *mcp.ListToolsParams:
		if p != nil {
			return p.Cursor
		}
	case *mcp.ListPromptsParams:
		if p != nil {
			return p.Cursor
		}
	case *mcp.ListResourcesParams:
		if p != nil {
			return p.Cursor
		}
	case *mcp.ListResourceTemplatesParams:
		if p != nil {
			return p.Cursor
		}
	}
	return ""
}
