package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// The wrappers: call_read_only_tool and call_tool run a tool named in their
// arguments, for an agent in search mode that calls only what it was
// listed. An agent approves a tool by its name and annotations, so an
// approval of a wrapper must not stand for more than the wrapper says:
//
//   - a wrapper runs no tool whose annotations are more permissive than its
//     own (call_read_only_tool runs only tools that say readOnlyHint: true;
//     call_tool says destructiveHint and openWorldHint, and runs any tool);
//   - a wrapper runs no tool whose own name the agent's model has (listed
//     to it, or about to be): there the tool's own approval and the agent's
//     permission rules for it apply. An agent known to list again on
//     tools/list_changed before its model's next request (Claude Code,
//     Copilot CLI, Cursor, VS Code, Windsurf) is never offered the
//     wrappers, and a wrapper it calls anyway lists the tool for it rather
//     than run it, so its rules (mcp__mcp-mux__github__*) hold in every
//     mode. Any other agent's model may not see a list_changed for turns
//     (Gemini CLI, opencode): only its first list is surely what its model
//     has, and a wrapper runs any tool found since, or the model would be
//     told to call a name it does not have.

// wrapperAnnotations are each wrapper's own annotations, as listed
// (mux/search's definitions): the most each may run.
var wrapperAnnotations = map[string]*mcp.ToolAnnotations{
	toolCallReadOnly: {ReadOnlyHint: true, OpenWorldHint: ptr(true)},
	toolCall:         {ReadOnlyHint: false, DestructiveHint: ptr(true), IdempotentHint: false, OpenWorldHint: ptr(true)},
}

func ptr[T any](v T) *T { return &v }

// hints are annotations with the spec's defaults filled in: a tool that
// says nothing may write, destroy, and reach the outside world.
type hints struct{ readOnly, destructive, idempotent, openWorld bool }

func hintsOf(a *mcp.ToolAnnotations) hints {
	h := hints{destructive: true, openWorld: true}
	if a == nil {
		return h
	}
	h.readOnly, h.idempotent = a.ReadOnlyHint, a.IdempotentHint
	if a.DestructiveHint != nil {
		h.destructive = *a.DestructiveHint
	}
	if a.OpenWorldHint != nil {
		h.openWorld = *a.OpenWorldHint
	}
	return h
}

// permits reports whether a wrapper annotated w may run a tool annotated
// t: t is no more permissive than w in any hint. destructiveHint and
// idempotentHint mean something only for a tool that is not read-only.
func permits(w, t *mcp.ToolAnnotations) bool {
	wh, th := hintsOf(w), hintsOf(t)
	if wh.readOnly && !th.readOnly {
		return false
	}
	if !th.readOnly && !wh.readOnly {
		if th.destructive && !wh.destructive {
			return false
		}
		if !th.idempotent && wh.idempotent {
			return false
		}
	}
	return !th.openWorld || wh.openWorld
}

// callArgs are a wrapper's arguments.
type callArgs struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// unwrapCall is the call wrapper r asks for: its tool and arguments, with
// the rest of the request (its _meta, a retry's answers) as it came.
func unwrapCall(r *mcp.CallToolRequest) (*mcp.CallToolRequest, error) {
	wrapper := r.Params.Name
	var a callArgs
	if err := json.Unmarshal(r.Params.Arguments, &a); err != nil || a.Name == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: wrapper + `: arguments must be {"name": "<tool>", "arguments": {...}}`}
	}
	if ownTool(a.Name) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: cannot call %s", wrapper, a.Name)}
	}
	p := *r.Params
	p.Name, p.Arguments = a.Name, a.Arguments
	inner := *r
	inner.Params = &p
	return &inner, nil
}

// callWrapped answers a wrapper's call: the tool it names runs only if
// the wrapper may run it (above); else a tool error says what to do.
func (m *Mux) callWrapped(ctx context.Context, r *mcp.CallToolRequest) (mcp.Result, error) {
	wrapper := r.Params.Name
	inner, err := unwrapCall(r)
	if err != nil {
		return nil, err
	}
	name := inner.Params.Name
	e, err := m.tool(m.viewOf(sessionFrom(ctx)), name)
	if err != nil {
		return nil, err // as a call by its name would get
	}
	why := m.ownNameApplies(sessionFrom(ctx), e)
	if why == "" && !permits(wrapperAnnotations[wrapper], e.item.Annotations) {
		why = fmt.Sprintf("%s runs only tools whose annotations say readOnlyHint: true, and %s does not: it may change things. Call it through %s, which asks for approval as a tool that may change or delete data.", wrapper, name, toolCall)
	}
	if why != "" {
		// A refusal is what an auditor looks for: it has its line.
		in := inboundOf(inner, "tools/call", name, nil)
		in.via, in.start, in.args = wrapper, time.Now(), inner.Params.Arguments
		m.auditRefused(ctx, e.mem, &in)
		return refused(why), nil
	}
	return m.callToolVia(ctx, inner, wrapper)
}

// ownNameApplies is why a wrapper must not run e for s ("" if it may): the
// agent's model has e under its own name, or is about to.
func (m *Mux) ownNameApplies(s *session, e exposed[mcp.Tool]) string {
	name := e.item.Name
	byName := fmt.Sprintf("%s is in your tool list: call it by its own name, %s, so that its own approval applies; a wrapper does not run it.", name, name)
	switch {
	case m.toolListMode(s) != config.ToolListSearch:
		return byName // every tool is listed
	case traitsOf(s).Relists:
		if s.working.noteFound([]string{name}) {
			m.workingSetChanged(s)
		}
		return fmt.Sprintf("%s is in your tool list now: call it by its own name, %s, so that its own approval and permission rules apply; a wrapper does not run it.", name, name)
	case inFirstList(s, e):
		return byName
	}
	return ""
}

// inFirstList reports whether e was in the first list the agent of s was
// sent; where no list of the session is known (a stateless request is a
// session of its own), whether e is pinned, and so in every list.
func inFirstList(s *session, e exposed[mcp.Tool]) bool {
	if s != nil {
		if in, known := s.working.inFirstList(e.item.Name); known {
			return in
		}
	}
	return pinned(e)
}

// refused is a wrapper's answer when it does not run the tool: a tool
// error, for the model to read and act on.
func refused(why string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: why}}}
}
