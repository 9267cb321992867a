package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// Lists as the backends sent them. mux reads of each tool, prompt and
// template what it needs (names, filters, templates to route by) from the
// go-sdk's types, but the agent gets each item as its backend wrote it,
// renamed with the backend's prefix: what the types do not know (a tool's
// execution, extension fields, anything newer than go-sdk v1.8.0) reaches
// it, in both eras and by both of mux's paths. A backend that takes no raw
// calls (a remote one) is listed through the go-sdk, so its items are what
// the types keep.

// rawItem is one item of a backend's list: decoded, and as sent.
type rawItem[T any] struct {
	v   *T
	raw json.RawMessage
}

// rawListPage is one page of a backend's list (the items under key) as it
// sent it; null items are left out and counted.
type rawListPage struct {
	items []json.RawMessage
	nulls int
	next  string
	cache mcp.Cacheable
}

// fetchList gets b's page of method's list at cursor, as b sent it.
func fetchList(ctx context.Context, b *backends.Backend, method, key, cursor string) (*rawListPage, error) {
	params := json.RawMessage(`{}`)
	if cursor != "" {
		params = json.RawMessage(`{"cursor":` + strconv.Quote(cursor) + `}`)
	}
	raw, err := b.CallRaw(ctx, method, params)
	if err != nil {
		return nil, err
	}
	return parseListPage(raw, method, key)
}

// parseListPage reads a list result as the go-sdk's types would (a wrong
// type where they have one is an error), but for the items, which go on
// as they are.
func parseListPage(raw json.RawMessage, method, key string) (*rawListPage, error) {
	top, ok := wire.ObjectMembers(raw)
	if !ok {
		if err := json.Unmarshal(raw, &top); err != nil || top == nil {
			return nil, fmt.Errorf("invalid %s result: not an object", method)
		}
	}
	page := &rawListPage{}
	for _, f := range []struct {
		key string
		v   any
	}{{"nextCursor", &page.next}, {"ttlMs", &page.cache.TTLMs}, {"cacheScope", &page.cache.CacheScope}} {
		if v, ok := top[f.key]; ok {
			if err := json.Unmarshal(v, f.v); err != nil {
				return nil, fmt.Errorf("invalid %s result: %s: %w", method, f.key, err)
			}
		}
	}
	list, ok := top[key]
	if !ok || string(list) == "null" {
		return page, nil
	}
	elems, ok := wire.ArrayElements(list)
	if !ok {
		return nil, fmt.Errorf("invalid %s result: %s is not an array", method, key)
	}
	page.items = elems[:0]
	for _, r := range elems {
		if string(r) == "null" {
			page.nulls++
			continue
		}
		page.items = append(page.items, r)
	}
	return page, nil
}

// listRaw pages through mem's list of method (items under key) and
// returns each item decoded and as sent: an item the go-sdk's type cannot
// hold is left out (logged), not the list.
func listRaw[T any](ctx context.Context, mem *member, b *backends.Backend, method, key, kind string, ok func(*T) bool) ([]rawItem[T], mcp.Cacheable, error) {
	items, cache, err := listPages(mem, func(c string) ([]*rawItem[T], string, mcp.Cacheable, error) {
		page, err := fetchList(ctx, b, method, key, c)
		if err != nil {
			return nil, "", mcp.Cacheable{}, err
		}
		if page.nulls > 0 {
			mem.log.Warn("null entry in the backend's list, skipped", "list", method, "count", page.nulls)
		}
		out := make([]*rawItem[T], 0, len(page.items))
		for _, r := range page.items {
			v := new(T)
			if err := json.Unmarshal(r, v); err != nil {
				mem.log.Warn("the backend lists a "+kind+" that does not decode, skipped", "err", err)
				continue
			}
			out = append(out, &rawItem[T]{v: v, raw: r})
		}
		return out, page.next, page.cache, nil
	}, func(it *rawItem[T]) bool { return ok(it.v) })
	flat := make([]rawItem[T], len(items))
	for i, it := range items {
		flat[i] = *it
	}
	return flat, cache, err
}

// values is the decoded items of a list.
func values[T any](items []rawItem[T]) []*T {
	out := make([]*T, len(items))
	for i, it := range items {
		out[i] = it.v
	}
	return out
}

// raws is the items of a list as sent.
func raws[T any](items []rawItem[T]) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, it := range items {
		out[i] = it.raw
	}
	return out
}

// fingerprintRaw hashes a list as sent: a change in any field counts.
func fingerprintRaw[T any](items []rawItem[T]) uint64 {
	h := fnv.New64a()
	for _, it := range items {
		h.Write(it.raw)
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// renamed is raw, an item as its backend sent it, with its name (the
// member "name") name, in a new slice; raw itself if that is its name
// already or it has no name member the scan can edit (then the item is
// encoded again from v, with the name).
func renamed(raw json.RawMessage, name string, v any) json.RawMessage {
	quoted := strconv.Quote(name)
	cur, ok := wire.ObjectMember(raw, "name")
	if ok && cur != nil {
		if string(cur) == quoted {
			return raw
		}
		return splice(raw, cur, []byte(quoted))
	}
	data, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return data
}

// rawArray is items as one JSON array.
func rawArray(items []json.RawMessage) json.RawMessage {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	return append(out, ']')
}

// withRawItems is res, a list result of the go-sdk's types, encoded with
// its list (the member key) replaced by items as their backends sent them.
func withRawItems(res any, key string, items []json.RawMessage) ([]byte, error) {
	data, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	list, ok := wire.ObjectMember(data, key)
	if !ok || list == nil {
		return nil, fmt.Errorf("mcp-mux: encoding a %s list: no %s in %.100s", key, key, data)
	}
	return splice(data, list, rawArray(items)), nil
}

// The merged lists' results: the go-sdk's types (it sets their resultType
// and server name in the current era), encoded with their items as sent.

type toolsPage struct {
	*mcp.ListToolsResult
	raw []json.RawMessage
}

func (p *toolsPage) MarshalJSON() ([]byte, error) {
	return withRawItems(p.ListToolsResult, "tools", p.raw)
}

type promptsPage struct {
	*mcp.ListPromptsResult
	raw []json.RawMessage
}

func (p *promptsPage) MarshalJSON() ([]byte, error) {
	return withRawItems(p.ListPromptsResult, "prompts", p.raw)
}

type templatesPage struct {
	*mcp.ListResourceTemplatesResult
	raw []json.RawMessage
}

func (p *templatesPage) MarshalJSON() ([]byte, error) {
	return withRawItems(p.ListResourceTemplatesResult, "resourceTemplates", p.raw)
}

// taskRequired reports whether a tool, as its backend sent it, must be
// called as a task (execution.taskSupport "required"), which mux does not
// offer: a plain call to it fails, as the spec says, with -32601.
func taskRequired(raw json.RawMessage) bool {
	exec, ok := wire.ObjectMember(raw, "execution")
	if !ok || exec == nil {
		return false
	}
	var e struct {
		TaskSupport string `json:"taskSupport"`
	}
	return json.Unmarshal(exec, &e) == nil && e.TaskSupport == "required"
}

// errTaskRequired is the answer to a plain call of a tool that must be
// called as a task.
func errTaskRequired(name string) error {
	return &methodNotFound{fmt.Sprintf("tool %q must be called as a task (its execution.taskSupport is \"required\"), and mcp-mux does not support tasks", name)}
}

// methodNotFound is a -32601 error that keeps its message: the go-sdk
// answers any error that is a *jsonrpc.Error of that code with its own
// bare "method not found", so this one converts to one (As) without being
// one (Is).
type methodNotFound struct{ msg string }

func (e *methodNotFound) Error() string { return e.msg }

func (e *methodNotFound) As(target any) bool {
	p, ok := target.(**jsonrpc.Error)
	if ok {
		*p = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: e.msg}
	}
	return ok
}
