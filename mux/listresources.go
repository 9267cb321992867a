package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// resources/list is served from the backends' pages as they sent them: of
// each resource mux reads only its uri (to leave out one an earlier backend
// owns) and passes the rest on as bytes. Decoding every resource into the
// go-sdk's types and encoding it again was most of what a page cost mux
// (a walk of 10 × 1,000 resources used 28 ms of mux's CPU), and dropped
// what the types do not know. The go-sdk's path (a session that is not
// stdio, or speaks the current era) decodes the page mux made once.

// listResources answers resources/list on the go-sdk's path.
func (m *Mux) listResources(ctx context.Context, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	var s *session // nil: no page is fetched ahead
	if req.Session != nil {
		s = m.session(req.Session)
	}
	raw, err := m.resourcesPage(ctx, s, paramsCursor(req.Params))
	if err != nil {
		return nil, err
	}
	res := &mcp.ListResourcesResult{}
	if err := json.Unmarshal(raw, res); err != nil {
		// A resource the types cannot hold (a wrong type in a field they
		// know) is left out, not the page: the rest of it still decodes.
		var page struct {
			mcp.Cacheable
			NextCursor string            `json:"nextCursor"`
			Resources  []json.RawMessage `json:"resources"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("decoding the page of resources mux made: %v", err)}
		}
		res = &mcp.ListResourcesResult{Cacheable: page.Cacheable, NextCursor: page.NextCursor}
		for _, r := range page.Resources {
			var one mcp.Resource
			if err := json.Unmarshal(r, &one); err != nil {
				m.log.Warn("a listed resource does not decode; left out for this session", "err", err)
				continue
			}
			res.Resources = append(res.Resources, &one)
		}
	}
	if res.Resources == nil {
		res.Resources = []*mcp.Resource{}
	}
	return res, nil
}

// resourcesPage is the page of resources/list at the agent's cursor cur,
// as JSON. It pages through the backends' own pages, in config order: one
// backend page per mux page, so a huge backend is never held in memory; a
// page carries its backend page's cache hints. mux's own resources come
// last, after every backend's: a client that reads only the first page
// sees the backends' resources. A URI an earlier backend claims is left out
// (the earlier one owns it). s is the session asking, nil for none.
func (m *Mux) resourcesPage(ctx context.Context, s *session, cur string) (json.RawMessage, error) {
	m.waitStarted(ctx)
	c, err := decodeCursor(cur, "resources")
	if err != nil {
		return nil, err
	}
	// One roster for the whole page: a reload may publish another
	// meanwhile. Only the backends of the agent's profile (profile.go).
	who := s
	if who == nil {
		who = sessionFrom(ctx)
	}
	members := m.viewOf(who).members(m.members())
	start := 0
	if c.Backend != "" {
		start = slices.IndexFunc(members, func(mem *member) bool { return mem.spec.Name == c.Backend })
		if start < 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid cursor %q: unknown backend", cur)}
		}
	}
	var out []json.RawMessage
	var cache mcp.Cacheable
	for i := start; i < len(members); i++ {
		mem := members[i]
		backendCursor := ""
		if i == start {
			backendCursor = c.Cursor
		}
		var page *resourcePage
		b, err := mem.backend()
		switch {
		case err != nil:
			// Not running: what it listed when last seen, if it waits to
			// be used (lazy.go); else nothing to list.
			if page = mem.resourcesAtRest(); page == nil {
				continue
			}
			err = nil
		case b.Capabilities().Resources == nil:
			continue
		}
		var ahead *listAhead
		if page == nil && i == start && s != nil && c.Backend != "" {
			ahead = m.takeAhead(ctx, s, cur, mem, b)
		}
		switch {
		case page != nil:
		case ahead != nil:
			page, err = ahead.page, ahead.err
		default:
			rctx, cancel := context.WithTimeout(ctx, m.requestTimeout(mem))
			page, err = fetchResources(rctx, b, backendCursor)
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
		keep := make([]bool, len(page.uris))
		for j, uri := range page.uris {
			keep[j] = !hasBuiltinScheme(uri) // logged when the catalog was fetched
		}
		unclaimed(servingMembers(members[:i]), page.uris, keep)
		ui := m.cat.get().ui
		for j, r := range page.resources {
			if !keep[j] && ui.alias(mem, page.uris[j]) != page.uris[j] {
				keep[j] = true // listed in its own form (uialias.go)
			}
			if keep[j] {
				out = append(out, ui.withUIAliases(mem, r))
			}
		}
		cache = normalCache(page.cache)
		if page.next != "" {
			next := cursor{Kind: "resources", Backend: mem.spec.Name, Cursor: page.next}.encode()
			if s != nil {
				m.fetchAhead(s, next, mem, b, page.next)
			}
			return resourcesJSON(out, next, cache), nil
		}
		if len(out) > 0 {
			// End this page with the backend's last page; the next one
			// starts at the following backend.
			if nextMem, nb := nextWithResources(members[i+1:]); nextMem != nil {
				next := cursor{Kind: "resources", Backend: nextMem.spec.Name}.encode()
				if s != nil && nb != nil {
					m.fetchAhead(s, next, nextMem, nb, "")
				}
				return resourcesJSON(out, next, cache), nil
			}
			break // the last backend page: mux's own come with it
		}
	}
	cache = mergeCache(cache, len(out) > 0, ownCache)
	for _, r := range m.builtinResources() {
		raw, err := json.Marshal(r)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("encoding mux's own resources: %v", err)}
		}
		out = append(out, raw)
	}
	return resourcesJSON(out, "", cache), nil
}

// resourcePage is one page of a backend's resources/list: its resources as
// the backend sent them (null ones left out), with their URIs.
type resourcePage struct {
	resources []json.RawMessage
	uris      []string
	nulls     int // null entries, left out
	next      string
	cache     mcp.Cacheable
}

// fetchResources gets b's page of resources at cursor.
func fetchResources(ctx context.Context, b *backends.Backend, cursor string) (*resourcePage, error) {
	list, err := fetchList(ctx, b, "resources/list", "resources", cursor)
	if err != nil {
		return nil, err
	}
	return resourcePageOf(list)
}

// parseResourcePage reads a resources/list result as the go-sdk's types
// would (a wrong type where they have one is an error, as it was when the
// page was decoded into them), but for what lies inside each resource
// besides its uri, which goes on as it is.
func parseResourcePage(raw json.RawMessage) (*resourcePage, error) {
	list, err := parseListPage(raw, "resources/list", "resources")
	if err != nil {
		return nil, err
	}
	return resourcePageOf(list)
}

// resourcePageOf is a page of resources, with their URIs.
func resourcePageOf(list *rawListPage) (*resourcePage, error) {
	page := &resourcePage{resources: list.items, nulls: list.nulls, next: list.next, cache: list.cache, uris: make([]string, 0, len(list.items))}
	for i, r := range list.items {
		uri, err := resourceURI(r)
		if err != nil {
			return nil, fmt.Errorf("invalid resources/list result: resource %d: %w", i, err)
		}
		page.uris = append(page.uris, uri)
	}
	return page, nil
}

// resourceURI is the uri of r, one resource of a list as a backend sent it.
func resourceURI(r json.RawMessage) (string, error) {
	v, ok := wire.ObjectMember(r, "uri")
	if !ok {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(r, &members); err != nil || members == nil {
			return "", fmt.Errorf("not an object")
		}
		v = members["uri"]
	}
	if n := len(v); n >= 2 && v[0] == '"' && !slices.Contains(v, '\\') && utf8.Valid(v) {
		return string(v[1 : n-1]), nil // no escapes: the string is its bytes
	}
	var uri string
	if v != nil {
		if err := json.Unmarshal(v, &uri); err != nil {
			return "", fmt.Errorf("uri: %w", err)
		}
	}
	return uri, nil
}

// resourcesJSON is a resources/list result of resources, with the next
// cursor next ("" for none) and cache hints, encoded as the go-sdk would
// encode its type.
func resourcesJSON(resources []json.RawMessage, next string, cache mcp.Cacheable) json.RawMessage {
	scope, _ := json.Marshal(cache.CacheScope)
	n := len(scope) + len(next) + 64
	for _, r := range resources {
		n += len(r) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, `{"ttlMs":`...)
	out = strconv.AppendInt(out, int64(cache.TTLMs), 10)
	out = append(out, `,"cacheScope":`...)
	out = append(out, scope...)
	if next != "" {
		out = append(out, `,"nextCursor":`...)
		out = strconv.AppendQuote(out, next) // base64: nothing to escape
	}
	out = append(out, `,"resources":[`...)
	for i, r := range resources {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, r...)
	}
	return append(out, "]}"...)
}
