package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
)

// The requests the go-sdk's path routes to one backend: each finds the
// owner of its name or URI, then forwards (forward.go). The stdio
// pass-through (passthrough.go) finds owners with the same functions.

// CodeResourceNotFound is MCP's error code for a read of an unknown
// resource (2025-11-25). The go-sdk still uses -32602 by default.
const CodeResourceNotFound = -32002

// inboundOf is what forward needs of one of the agent's typed requests
// (whose params the go-sdk requires: they are never nil) for target, with
// the round of input answers it carries (nil for none).
func inboundOf[P mcp.Params](r *mcp.ServerRequest[P], method, target string, rd *round) inbound {
	return inbound{ss: r.Session, extra: r.Extra, meta: r.Params.GetMeta(), method: method, target: target, round: rd}
}

// roundOf is the round a request's params carry, if any.
func roundOf(responses mcp.InputResponseMap, state string) *round {
	if responses == nil && state == "" {
		return nil
	}
	return &round{responses: responses, state: state}
}

// callTool routes by exposed name; the backend is called with the tool's
// original name and the agent's arguments and _meta, and its result goes
// to the agent as it sent it.
func (m *Mux) callTool(ctx context.Context, r *mcp.CallToolRequest) (mcp.Result, error) {
	return m.callToolVia(ctx, r, "")
}

// callToolVia is callTool for a call that came through the wrapper via
// ("" for none), which its audit line names.
func (m *Mux) callToolVia(ctx context.Context, r *mcp.CallToolRequest, via string) (mcp.Result, error) {
	m.waitStarted(ctx)
	p := r.Params
	if !argumentsObject(p.Arguments) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call: arguments must be an object"}
	}
	switch p.Name { // mux's own tools (toolsearch.go)
	case toolSearch:
		return m.searchTools(ctx, sessionFrom(ctx), p.Arguments)
	case toolCall, toolCallReadOnly:
		return m.callWrapped(ctx, r) // wrappers.go
	}
	e, err := m.tool(m.viewOf(sessionFrom(ctx)), p.Name)
	if err != nil {
		return nil, err
	}
	if taskRequired(e.raw) {
		return nil, errTaskRequired(p.Name)
	}
	original, _ := json.Marshal(e.original)
	// The session's name of the tool, whichever of its names the agent
	// called it by (fitnames.go).
	name := e.item.Name
	in := inboundOf(r, "tools/call", name, roundOf(p.InputResponses, p.RequestState))
	in.via = via
	res, err := forwardBytes(ctx, m, e.mem, in, nil, []param{{"name", original}, {"arguments", bytes.TrimSpace(p.Arguments)}})
	if err != nil {
		return nil, err
	}
	s := sessionFrom(ctx)
	m.calledTool(s, name)
	return &callResult{&mcp.CallToolResult{}, m.finishResult(s, e.mem, "tools/call", res)}, nil
}

// argumentsObject reports whether a tool call's arguments are an object
// (or absent, or null).
func argumentsObject(args json.RawMessage) bool {
	a := bytes.TrimSpace(args)
	return len(a) == 0 || a[0] == '{' || string(a) == "null"
}

// tool is the catalog's tool the agent calls name, or the error for a name
// it lacks; v is the agent's view (profile.go).
func (m *Mux) tool(v *view, name string) (exposed[mcp.Tool], error) {
	e, ok := v.of(m.cat.get()).tools.lookup(name)
	if !ok {
		return e, m.unknownName(v, "tool", name)
	}
	return e, nil
}

func (m *Mux) getPrompt(ctx context.Context, r *mcp.GetPromptRequest) (mcp.Result, error) {
	m.waitStarted(ctx)
	p := r.Params
	v := m.viewOf(sessionFrom(ctx))
	e, ok := v.of(m.cat.get()).prompts.lookup(p.Name)
	if !ok {
		return nil, m.unknownName(v, "prompt", p.Name)
	}
	original, _ := json.Marshal(e.original)
	var args json.RawMessage
	if p.Arguments != nil {
		args, _ = json.Marshal(p.Arguments)
	}
	in := inboundOf(r, "prompts/get", p.Name, roundOf(p.InputResponses, p.RequestState))
	res, err := forwardBytes(ctx, m, e.mem, in, nil, []param{{"name", original}, {"arguments", args}})
	if err != nil {
		return nil, err
	}
	return &promptResult{&mcp.GetPromptResult{}, m.finishResult(sessionFrom(ctx), e.mem, "prompts/get", res)}, nil
}

// owner finds the backend that serves uri: the first in config order that
// lists it exactly, matches it with a template, or returned it in a tool
// result. Config order decides between every kind of match, so a later
// backend cannot take an earlier one's URI by listing it. URIs are never
// rewritten; mux's own scheme is never routed to a backend. Only the
// backends of the agent's view v are looked at.
func (m *Mux) owner(v *view, uri string) (*member, bool) {
	if hasBuiltinScheme(uri) {
		return nil, false
	}
	for _, mem := range v.members(m.members()) {
		if mem.claims(uri) {
			return mem, true
		}
	}
	return nil, false
}

// route is where a read (or subscription) of uri goes: the backend that
// owns it, and the URI there, which differs for a ui:// URI in a
// backend's own form (uialias.go). v is the agent's view (profile.go).
func (m *Mux) route(v *view, uri string) (*member, string, bool) {
	if t, ok := m.cat.get().ui.target[uri]; ok {
		return t.mem, t.uri, v.has(t.mem)
	}
	mem, ok := m.owner(v, uri)
	return mem, uri, ok
}

// maxURILength bounds the URIs mux matches against subscriptions and
// routes: far above any real URI, far below what could cost time.
const maxURILength = 64 << 10

var errMissingURI = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing uri"}

func resourceNotFound(uri string) error {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return &jsonrpc.Error{Code: CodeResourceNotFound, Message: "Resource not found", Data: data}
}

func (m *Mux) readResource(ctx context.Context, r *mcp.ReadResourceRequest) (mcp.Result, error) {
	p := r.Params
	if p.URI == "" {
		return nil, errMissingURI
	}
	v := m.viewOf(sessionFrom(ctx))
	if res, ok := m.readBuiltin(m.sessionID(r.Session), v, p.URI); ok {
		return res, nil
	}
	m.waitStarted(ctx)
	mem, backendURI, ok := m.route(v, p.URI)
	if !ok {
		return nil, resourceNotFoundFor(r.Session, p.URI)
	}
	uri, _ := json.Marshal(backendURI)
	in := inboundOf(r, "resources/read", p.URI, roundOf(p.InputResponses, p.RequestState))
	res, err := forwardBytes(ctx, m, mem, in, nil, []param{{"uri", uri}})
	if err != nil {
		return nil, err
	}
	return &readResult{&mcp.ReadResourceResult{}, m.finishResult(sessionFrom(ctx), mem, "resources/read", res)}, nil
}

// The results of callTool, getPrompt and readResource on the go-sdk's
// path: the backend's bytes (amended as finishResult says), which the
// go-sdk encodes as they are. The go-sdk's type they carry is empty: what
// it sets there (the server's name, in the current era) the bytes have
// already.

type callResult struct {
	*mcp.CallToolResult
	raw json.RawMessage
}

func (r *callResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

type promptResult struct {
	*mcp.GetPromptResult
	raw json.RawMessage
}

func (r *promptResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

type readResult struct {
	*mcp.ReadResourceResult
	raw json.RawMessage
}

func (r *readResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// complete routes completion/complete by its reference: a prompt by its
// exposed name (renamed back), a resource template by the backend that has
// it (or that owns the URI).
func (m *Mux) complete(ctx context.Context, r *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	m.waitStarted(ctx)
	p := r.Params
	if p.Ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete: missing ref"}
	}
	ref := *p.Ref
	var mem *member
	v := m.viewOf(sessionFrom(ctx))
	switch ref.Type {
	case "ref/prompt":
		e, ok := v.of(m.cat.get()).prompts.lookup(ref.Name)
		if !ok {
			return nil, m.unknownName(v, "prompt", ref.Name)
		}
		mem, ref.Name = e.mem, e.original
	case "ref/resource":
		for _, e := range v.of(m.cat.get()).templates {
			if e.item.URITemplate == ref.URI {
				mem = e.mem
				break
			}
		}
		if mem == nil {
			var ok bool
			if mem, ok = m.owner(v, ref.URI); !ok {
				return nil, resourceNotFoundFor(r.Session, ref.URI)
			}
		}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown completion ref type %q", ref.Type)}
	}
	return forward(ctx, m, mem, inboundOf(r, "completion/complete", "", nil), func(ctx context.Context, b *backends.Backend, meta mcp.Meta, _ *round) (*mcp.CompleteResult, error) {
		fwd := *p
		fwd.Ref, fwd.Meta = &ref, meta
		return b.Session().Complete(ctx, &fwd)
	})
}
