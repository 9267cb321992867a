// Package override applies a backend's [[backend.override]] entries to its
// tools: the name, title, description and annotations the agent sees
// instead of the backend's own.
//
// An override changes a copy of the tool as mux decoded it (what mux reads
// of a tool: its annotations decide what call_read_only_tool may run, its
// text is what search_tools searches) and the tool as the backend sent it
// (what the agent gets, with fields the go-sdk's types do not know), the
// same way, so the two never disagree. The backend's own lists, and what
// mux remembers of them, are never changed: an override is applied anew at
// every merge of the catalogs, so changing it needs no new listing.
package override

import (
	"bytes"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// Apply is t and raw (t as its backend sent it; nil if not known) changed
// as o says. Name becomes o's name before any prefix: exposing it is the
// caller's. Neither t nor raw is modified; t's annotations are copied
// before they change. A raw tool that is not a JSON object is left as
// it is: the caller encodes t instead.
func Apply(o config.ToolOverride, t mcp.Tool, raw json.RawMessage) (mcp.Tool, json.RawMessage) {
	if o.Name != "" {
		t.Name = o.Name
	}
	if o.Title != "" {
		t.Title = o.Title
	}
	if o.Description != "" {
		t.Description = o.Description
	}
	if h := o.Annotations; h != nil && *h != (config.ToolHints{}) {
		a := mcp.ToolAnnotations{}
		if t.Annotations != nil {
			a = *t.Annotations
		}
		if h.Title != nil {
			a.Title = *h.Title
		}
		if h.ReadOnlyHint != nil {
			a.ReadOnlyHint = *h.ReadOnlyHint
		}
		if h.DestructiveHint != nil {
			a.DestructiveHint = ptr(*h.DestructiveHint)
		}
		if h.IdempotentHint != nil {
			a.IdempotentHint = *h.IdempotentHint
		}
		if h.OpenWorldHint != nil {
			a.OpenWorldHint = ptr(*h.OpenWorldHint)
		}
		t.Annotations = &a
	}
	return t, applyRaw(o, raw)
}

// applyRaw is raw with o's fields set, in a new slice: its other members,
// and the annotations o does not set, as the backend sent them. Members
// are in key order then. nil if raw is nil or not an object.
func applyRaw(o config.ToolOverride, raw json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if raw == nil || json.Unmarshal(raw, &top) != nil || top == nil {
		return nil
	}
	set := func(m map[string]json.RawMessage, key string, v any) {
		m[key] = encode(v)
	}
	if o.Name != "" {
		set(top, "name", o.Name)
	}
	if o.Title != "" {
		set(top, "title", o.Title)
	}
	if o.Description != "" {
		set(top, "description", o.Description)
	}
	if h := o.Annotations; h != nil && *h != (config.ToolHints{}) {
		var a map[string]json.RawMessage
		if json.Unmarshal(top["annotations"], &a) != nil || a == nil {
			a = map[string]json.RawMessage{} // absent, null, or not an object: the override's only
		}
		for _, f := range []struct {
			key string
			v   any
		}{{"title", h.Title}, {"readOnlyHint", h.ReadOnlyHint}, {"destructiveHint", h.DestructiveHint}, {"idempotentHint", h.IdempotentHint}, {"openWorldHint", h.OpenWorldHint}} {
			switch v := f.v.(type) {
			case *string:
				if v != nil {
					set(a, f.key, *v)
				}
			case *bool:
				if v != nil {
					set(a, f.key, *v)
				}
			}
		}
		top["annotations"] = encode(a)
	}
	return encode(top)
}

// encode is v as JSON, without the HTML escapes json.Marshal adds: the
// agent gets a description's "<" as "<", as the backend wrote it.
func encode(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil // strings, bools and valid raw JSON always encode
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func ptr[T any](v T) *T { return &v }
