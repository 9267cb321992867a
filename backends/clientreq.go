package backends

import (
	"context"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// declared keeps of want what mcp-mux can honour for a backend: roots,
// sampling and elicitation, which it forwards, and the extensions the
// agent supports (a backend shows through mux what it shows the agent). Never nil: a nil Capabilities
// option would make the go-sdk declare its default roots.
func declared(want *mcp.ClientCapabilities) *mcp.ClientCapabilities {
	caps := &mcp.ClientCapabilities{}
	if want == nil {
		return caps
	}
	if want.RootsV2 != nil {
		r := *want.RootsV2
		caps.RootsV2 = &r
	}
	if want.Sampling != nil {
		s := *want.Sampling
		caps.Sampling = &s
	}
	if want.Elicitation != nil {
		e := *want.Elicitation
		caps.Elicitation = &e
	}
	if len(want.Extensions) > 0 {
		caps.Extensions = maps.Clone(want.Extensions)
	}
	return caps
}

// clientRequests answers the backend's roots/list, sampling/createMessage
// and elicitation/create with the hooks. The go-sdk has no roots handler,
// and its sampling and elicitation handlers validate and rewrite what
// passes (schema defaults applied to an elicitation's content): a proxy
// passes the request and the answer on as they are. rootsAnswered is
// called once a roots/list is answered, however.
func clientRequests(h Hooks, rootsAnswered func()) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch r := req.(type) {
			case *mcp.ListRootsRequest:
				defer rootsAnswered()
				if h.Roots != nil {
					return result(h.Roots(ctx, r.Params))
				}
			case *mcp.CreateMessageWithToolsRequest:
				if h.CreateMessage != nil {
					return result(h.CreateMessage(ctx, r.Params))
				}
			case *mcp.ElicitRequest:
				if h.Elicit != nil {
					return result(h.Elicit(ctx, r.Params))
				}
			}
			return next(ctx, method, req)
		}
	}
}

// result keeps a typed nil result out of the mcp.Result interface.
func result[R mcp.Result](res R, err error) (mcp.Result, error) {
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ClientCapabilities is what mcp-mux declared to the backend in initialize.
func (b *Backend) ClientCapabilities() *mcp.ClientCapabilities {
	b = b.real()
	return b.caps
}

// NotifyRootsListChanged sends the backend notifications/roots/list_changed
// (the go-sdk sends it only when a client's own roots change).
func (b *Backend) NotifyRootsListChanged(ctx context.Context) error {
	b = b.real()
	req := &mcp.ClientRequest[*mcp.RootsListChangedParams]{Session: b.session, Params: &mcp.RootsListChangedParams{}}
	if _, err := b.sendRaw(ctx, "notifications/roots/list_changed", req); err != nil {
		return fmt.Errorf("notifications/roots/list_changed: %w", err)
	}
	return nil
}
