package mux

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
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

// page returns the page of a catalog list that starts at cursor s.
func page[T any](items []exposed[T], s, kind string) ([]*T, string, error) {
	c, err := decodeCursor(s, kind)
	if err != nil {
		return nil, "", err
	}
	if c.Offset > len(items) {
		return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid cursor %q: past the end of the list", s)}
	}
	end := min(c.Offset+pageSize, len(items))
	out := make([]*T, 0, end-c.Offset)
	for _, e := range items[c.Offset:end] {
		out = append(out, e.item)
	}
	next := ""
	if end < len(items) {
		next = cursor{Kind: kind, Offset: end}.encode()
	}
	return out, next, nil
}

func (m *Mux) listTools(ctx context.Context, p *mcp.ListToolsParams) (*mcp.ListToolsResult, error) {
	m.waitStarted(ctx)
	cat := m.cat.get()
	items, next, err := page(cat.tools.items, paramsCursor(p), "tools")
	if err != nil {
		return nil, err
	}
	return &mcp.ListToolsResult{Tools: items, NextCursor: next, Cacheable: cat.cache[0]}, nil
}

func (m *Mux) listPrompts(ctx context.Context, p *mcp.ListPromptsParams) (*mcp.ListPromptsResult, error) {
	m.waitStarted(ctx)
	cat := m.cat.get()
	items, next, err := page(cat.prompts.items, paramsCursor(p), "prompts")
	if err != nil {
		return nil, err
	}
	return &mcp.ListPromptsResult{Prompts: items, NextCursor: next, Cacheable: cat.cache[1]}, nil
}

func (m *Mux) listTemplates(ctx context.Context, p *mcp.ListResourceTemplatesParams) (*mcp.ListResourceTemplatesResult, error) {
	m.waitStarted(ctx)
	cat := m.cat.get()
	items, next, err := page(cat.templates, paramsCursor(p), "templates")
	if err != nil {
		return nil, err
	}
	return &mcp.ListResourceTemplatesResult{ResourceTemplates: items, NextCursor: next, Cacheable: cat.cache[2]}, nil
}

// listResources pages through the backends' own pages, in config order: one
// backend page per mux page, so a huge backend is never held in memory; a
// page carries its backend page's cache hints. mux's own resources come
// last, after every backend's: a client that reads only the first page
// sees the backends' resources. A URI an earlier backend claims is left out
// (the earlier one owns it).
func (m *Mux) listResources(ctx context.Context, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	m.waitStarted(ctx)
	p := req.Params
	var s *session // nil: no page is fetched ahead
	if req.Session != nil {
		s = m.session(req.Session)
	}
	c, err := decodeCursor(paramsCursor(p), "resources")
	if err != nil {
		return nil, err
	}
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	// One roster for the whole page: a reload may publish another meanwhile.
	members := m.members()
	start := 0
	if c.Backend != "" {
		start = slices.IndexFunc(members, func(mem *member) bool { return mem.spec.Name == c.Backend })
		if start < 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid cursor %q: unknown backend", paramsCursor(p))}
		}
	}
	for i := start; i < len(members); i++ {
		mem := members[i]
		backendCursor := ""
		if i == start {
			backendCursor = c.Cursor
		}
		b, err := mem.backend()
		if err != nil || b.Capabilities().Resources == nil {
			continue // down or without resources: nothing to list
		}
		var r *mcp.ListResourcesResult
		var ahead *listAhead
		if i == start && s != nil && c.Backend != "" {
			ahead = m.takeAhead(ctx, s, paramsCursor(p), mem, b)
		}
		if ahead != nil {
			r, err = ahead.res, ahead.err
		} else {
			rctx, cancel := context.WithTimeout(ctx, m.requestTimeout(mem))
			r, err = b.Session().ListResources(rctx, &mcp.ListResourcesParams{Cursor: backendCursor})
			cancel()
		}
		if err != nil {
			if backendCursor != "" {
				// The backend rejected its own cursor (it restarted, or the
				// agent made one up): that is the agent's cursor being stale.
				return nil, toAgentError(mem, err)
			}
			mem.log.Warn("listing resources failed; skipped in this list", "err", err)
			continue
		}
		earlier := servingMembers(members[:i])
		for _, r := range r.Resources {
			if r == nil || hasBuiltinScheme(r.URI) {
				continue // logged when the catalog was fetched
			}
			if !shadowed(earlier, r.URI) {
				res.Resources = append(res.Resources, r)
			}
		}
		res.Cacheable = normalCache(r.Cacheable)
		if r.NextCursor != "" {
			res.NextCursor = cursor{Kind: "resources", Backend: mem.spec.Name, Cursor: r.NextCursor}.encode()
			if s != nil {
				m.fetchAhead(s, res.NextCursor, mem, b, r.NextCursor)
			}
			return res, nil
		}
		if len(res.Resources) > 0 {
			// End this page with the backend's last page; the next one
			// starts at the following backend.
			if nextMem, nb := nextWithResources(members[i+1:]); nextMem != nil {
				res.NextCursor = cursor{Kind: "resources", Backend: nextMem.spec.Name}.encode()
				if s != nil {
					m.fetchAhead(s, res.NextCursor, nextMem, nb, "")
				}
				return res, nil
			}
			break // the last backend page: mux's own come with it
		}
	}
	res.Cacheable = mergeCache(res.Cacheable, len(res.Resources) > 0, ownCache)
	res.Resources = append(res.Resources, m.builtinResources()...)
	return res, nil
}

// nextWithResources is the first of members that can list resources now,
// and its backend.
func nextWithResources(members []*member) (*member, *backends.Backend) {
	for _, mem := range members {
		if b, err := mem.backend(); err == nil && b.Capabilities().Resources != nil {
			return mem, b
		}
	}
	return nil, nil
}

// servingMembers are those of members that are serving now.
func servingMembers(members []*member) []*member {
	var out []*member
	for _, mem := range members {
		if mem.serving() {
			out = append(out, mem)
		}
	}
	return out
}

// shadowed reports whether one of earlier (the serving backends before the
// one listing uri) claims uri (and owns it).
func shadowed(earlier []*member, uri string) bool {
	for _, other := range earlier {
		if other.claims(uri) {
			return true
		}
	}
	return false
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
