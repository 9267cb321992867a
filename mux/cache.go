package mux

import (
	"bytes"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Cache hints (ttlMs, cacheScope) of the lists mux serves. A page of
// resources comes from one backend's page and carries that page's hints.
// The merged lists (tools, prompts, templates) carry the most cautious
// hints of their parts: the smallest ttl and the narrowest scope. A backend
// of the handshake era sends none, which reads as ttl 0 ("stale at once")
// and the default scope, "public". mux's own resources change with every
// subscription and backend event, and show this user's sessions: ttl 0,
// "private".

// ownCache is the hints of mcp-mux's own resources.
var ownCache = mcp.Cacheable{TTLMs: 0, CacheScope: "private"}

// normalCache fills in what the protocol defaults an absent field to.
func normalCache(c mcp.Cacheable) mcp.Cacheable {
	if c.CacheScope == "" {
		c.CacheScope = "public"
	}
	if c.TTLMs < 0 {
		c.TTLMs = 0
	}
	return c
}

// mergeCache is the more cautious of two hints; ok says whether a holds
// anything yet (the zero value is a valid hint).
func mergeCache(a mcp.Cacheable, ok bool, b mcp.Cacheable) mcp.Cacheable {
	b = normalCache(b)
	if !ok {
		return b
	}
	a.TTLMs = min(a.TTLMs, b.TTLMs)
	if b.CacheScope != "public" {
		a.CacheScope = b.CacheScope
	}
	return a
}

// maxListPages bounds how many pages of one list mux reads from a backend:
// a backend that hands out cursors forever must not hold mux in a loop.
const maxListPages = 10_000

// listPages reads every page of one of a backend's lists: page returns a
// page's items, the next cursor and the page's cache hints. Null entries
// and those ok refuses (it logs why) are left out: one bad entry must not
// cost the rest of the list, nor crash mux.
func listPages[T any](mem *member, page func(cursor string) ([]*T, string, mcp.Cacheable, error), ok func(*T) bool) ([]*T, mcp.Cacheable, error) {
	out := []*T{}
	var cache mcp.Cacheable
	cursor := ""
	for n := 0; ; n++ {
		if n == maxListPages {
			mem.log.Warn("the backend's list goes on past the page limit; the rest is left out", "pages", maxListPages)
			break
		}
		items, next, c, err := page(cursor)
		if err != nil {
			return out, cache, err
		}
		cache = mergeCache(cache, n > 0, c)
		for _, v := range items {
			if v == nil {
				mem.log.Warn("null entry in the backend's list, skipped")
				continue
			}
			if ok(v) {
				out = append(out, v)
			}
		}
		if next == "" || next == cursor {
			break
		}
		cursor = next
	}
	return out, cache, nil
}

// validCacheHints is a read result with the cache hints an agent may
// rely on: a backend on the go-sdk that set none sends the invalid scope
// "" (which the TypeScript SDK v2 client rejects), and a negative ttl is
// meaningless. Only such a result is decoded (its top level) and encoded
// again; the rest go as sent.
func validCacheHints(res json.RawMessage) json.RawMessage {
	if !bytes.Contains(res, []byte(`"cacheScope":""`)) && !bytes.Contains(res, []byte(`"ttlMs":-`)) {
		return res
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(res, &top) != nil {
		return res
	}
	var c mcp.Cacheable
	_ = json.Unmarshal(top["cacheScope"], &c.CacheScope)
	_ = json.Unmarshal(top["ttlMs"], &c.TTLMs)
	c = normalCache(c)
	top["cacheScope"], _ = json.Marshal(c.CacheScope)
	top["ttlMs"], _ = json.Marshal(c.TTLMs)
	fixed, err := json.Marshal(top)
	if err != nil {
		return res
	}
	return fixed
}
