package mux

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// receive is the receiving middleware: every request the agent sends that
// concerns the merged catalog is answered here, not by the go-sdk's own
// feature sets (mirroring backends into those panics on real backends' data
// and refuses URIs a backend serves without listing them).
func (m *Mux) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			m.session(ss).lastActive.Store(time.Now().UnixNano())
		}
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			return m.listTools(ctx, r.Params)
		case *mcp.ListPromptsRequest:
			return m.listPrompts(ctx, r.Params)
		case *mcp.ListResourcesRequest:
			return m.listResources(ctx, r)
		case *mcp.ListResourceTemplatesRequest:
			return m.listTemplates(ctx, r.Params)
		case *mcp.CallToolRequest:
			return m.callTool(ctx, r)
		case *mcp.GetPromptRequest:
			return m.getPrompt(ctx, r)
		case *mcp.ReadResourceRequest:
			return m.readResource(ctx, r)
		case *mcp.CompleteRequest:
			return m.complete(ctx, r)
		case *mcp.SubscriptionsListenRequest:
			return m.listen(ctx, method, req, next)
		case *mcp.ServerRequest[*mcp.SetLoggingLevelParams]:
			m.setLevel(ctx, r) // and the go-sdk records it (next)
		}
		// initialize, ping, logging/setLevel, and resources/subscribe and
		// unsubscribe (which reach m.subscribe / m.unsubscribe through the
		// SDK, so that it keeps its own bookkeeping consistent).
		return next(ctx, method, req)
	}
}
