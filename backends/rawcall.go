package backends

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Raw calls are requests whose params are already JSON and whose result is
// wanted as JSON: mux forwards nearly all of an agent's traffic
// (tools/call, resources/read) this way, because the go-sdk's typed round
// trip (decode the params, encode them, decode the result, encode it again)
// was most of what a request cost in mcp-mux. They share the stdio pipe with
// the go-sdk's client session: their ids are strings of our own
// ("mcp-mux-raw-N"), which the SDK's integer ids never are, and their
// responses are taken off the stream (childConn.Read) before the SDK
// sees them. Everything else the backend sends (progress, requests to the
// client, notifications) still goes through the SDK's session.

// rawIDPrefix starts the id of every raw call.
const rawIDPrefix = "mcp-mux-raw-"

// rawCalls is a connection's raw calls in flight.
type rawCalls struct {
	mu      sync.Mutex
	seq     uint64
	waiting map[string]chan *jsonrpc.Response
	down    error // set once the connection ended: no call is sent or waits any more
}

// RawCalls reports whether CallRaw goes as bytes (a stdio backend); to a
// remote one, whose transport the go-sdk owns, it goes through the go-sdk's
// types.
func (b *Backend) RawCalls() bool { return b.remote == nil }

// CallRaw sends the backend the request method with params (a JSON object,
// or nil) and returns the result as the backend sent it. A JSON-RPC error
// from the backend is returned as a *jsonrpc.Error; if ctx ends first, the
// backend is sent notifications/cancelled (with the reason ctx carries, see
// WithCancelReason) and ctx's error is returned, as the go-sdk's calls do.
// A remote backend is called through the go-sdk's session (typedCall): its
// result is what the go-sdk's types keep of it.
func (b *Backend) CallRaw(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if b.remote != nil {
		return b.typedCall(ctx, method, params)
	}
	return b.conn.callRaw(ctx, method, params)
}

// typedCall is CallRaw through the go-sdk's session, for the methods mux
// forwards.
func (b *Backend) typedCall(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	cs := b.session
	var res any
	var err error
	switch method {
	case "tools/call":
		res, err = typed(params, func(p *mcp.CallToolParams) (*mcp.CallToolResult, error) { return cs.CallTool(ctx, p) })
	case "prompts/get":
		res, err = typed(params, func(p *mcp.GetPromptParams) (*mcp.GetPromptResult, error) { return cs.GetPrompt(ctx, p) })
	case "resources/read":
		res, err = typed(params, func(p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) { return cs.ReadResource(ctx, p) })
	case "resources/list":
		res, err = typed(params, func(p *mcp.ListResourcesParams) (*mcp.ListResourcesResult, error) { return cs.ListResources(ctx, p) })
	case "completion/complete":
		res, err = typed(params, func(p *mcp.CompleteParams) (*mcp.CompleteResult, error) { return cs.Complete(ctx, p) })
	default:
		return nil, fmt.Errorf("mcp-mux has no typed call for %s", method)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// typed decodes params into P and calls f with them.
func typed[P any, R any](params json.RawMessage, f func(*P) (R, error)) (R, error) {
	p := new(P)
	if err := json.Unmarshal(params, p); err != nil {
		var zero R
		return zero, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	return f(p)
}

func (c *childConn) callRaw(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply := make(chan *jsonrpc.Response, 1)
	c.raw.mu.Lock()
	if c.raw.down != nil {
		err := c.raw.down
		c.raw.mu.Unlock()
		return nil, err
	}
	c.raw.seq++
	id := rawIDPrefix + strconv.FormatUint(c.raw.seq, 10)
	if c.raw.waiting == nil {
		c.raw.waiting = map[string]chan *jsonrpc.Response{}
	}
	c.raw.waiting[id] = reply
	c.raw.mu.Unlock()

	line := make([]byte, 0, len(params)+len(method)+len(id)+64)
	line = append(line, `{"jsonrpc":"2.0","id":"`...)
	line = append(line, id...)
	line = append(line, `","method":`...)
	line = strconv.AppendQuote(line, method)
	if params != nil {
		line = append(line, `,"params":`...)
		line = append(line, params...)
	}
	line = append(line, "}\n"...)
	if _, err := c.in.Write(line); err != nil {
		c.forget(id)
		if c.isClosed() {
			return nil, fmt.Errorf("%w: calling %q", mcp.ErrConnectionClosed, method)
		}
		return nil, fmt.Errorf("writing to its stdin: %w", err)
	}
	select {
	case r := <-reply:
		if r == nil {
			return nil, c.downErr(method)
		}
		if r.Error != nil {
			var je *jsonrpc.Error
			if errors.As(r.Error, &je) {
				return nil, je
			}
			return nil, fmt.Errorf("calling %q: %w", method, r.Error)
		}
		if res := bytes.TrimSpace(r.Result); len(res) == 0 || res[0] != '{' {
			// Every MCP result is an object; the go-sdk's types would
			// have refused this one too.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: fmt.Sprintf("backend %s sent a result that is not an object: %s", c.name, snippet(res))}
		}
		return r.Result, nil
	case <-ctx.Done():
		c.forget(id)
		// Off the caller's path, as the go-sdk does: a backend that does
		// not read its stdin must not hold the caller past its deadline.
		go c.cancelRaw(ctx, id)
		return nil, ctx.Err()
	}
}

// cancelRaw tells the backend that the raw call id was cancelled.
func (c *childConn) cancelRaw(ctx context.Context, id string) {
	p, _ := json.Marshal(mcp.CancelledParams{Reason: ctx.Err().Error(), RequestID: id})
	msg := withCancelReason(ctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: p})
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return
	}
	_, _ = c.in.Write(append(data, '\n'))
}

func (c *childConn) forget(id string) {
	c.raw.mu.Lock()
	delete(c.raw.waiting, id)
	c.raw.mu.Unlock()
}

func (c *childConn) downErr(method string) error {
	c.raw.mu.Lock()
	defer c.raw.mu.Unlock()
	return fmt.Errorf("%w: calling %q", c.raw.down, method)
}

// takeRaw hands msg to the raw call it answers, and reports whether it was
// the response to one (answered, or given up on: the go-sdk must not see
// an id it never sent).
func (c *childConn) takeRaw(msg jsonrpc.Message) bool {
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		return false
	}
	id, ok := r.ID.Raw().(string)
	if !ok || !strings.HasPrefix(id, rawIDPrefix) {
		return false
	}
	c.raw.mu.Lock()
	reply := c.raw.waiting[id]
	delete(c.raw.waiting, id)
	c.raw.mu.Unlock()
	if reply != nil {
		reply <- r
	}
	return true
}

// endRaw fails every raw call in flight: the connection ended.
func (c *childConn) endRaw(why error) {
	c.raw.mu.Lock()
	defer c.raw.mu.Unlock()
	if c.raw.down == nil {
		c.raw.down = why
	}
	for id, reply := range c.raw.waiting {
		reply <- nil
		delete(c.raw.waiting, id)
	}
}
