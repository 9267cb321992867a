package backends

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The go-sdk tells a backend why a request was cancelled with the context's
// error ("context canceled"). mux knows better (the agent's own reason, or
// its request_timeout): it attaches the reason to the request's context,
// and the connection puts it in the notifications/cancelled it sends. The
// SDK sends that notification with a context that keeps the request's
// values.

type cancelReasonKey struct{}

// WithCancelReason returns a context whose request, if cancelled, is
// cancelled at the backend with the reason reason returns then ("" keeps
// the go-sdk's).
func WithCancelReason(ctx context.Context, reason func() string) context.Context {
	return context.WithValue(ctx, cancelReasonKey{}, reason)
}

// withCancelReason rewrites a notifications/cancelled with the reason its
// context carries, if any.
func withCancelReason(ctx context.Context, msg jsonrpc.Message) jsonrpc.Message {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "notifications/cancelled" {
		return msg
	}
	reason, _ := ctx.Value(cancelReasonKey{}).(func() string)
	if reason == nil {
		return msg
	}
	r := reason()
	if r == "" {
		return msg
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(req.Params, &p) != nil {
		return msg
	}
	p["reason"], _ = json.Marshal(r)
	params, err := json.Marshal(p)
	if err != nil {
		return msg
	}
	cp := *req
	cp.Params = params
	return &cp
}
