// Package door is how agents reach mcp-mux: the transports an agent's
// session comes in by, each turning its bytes into JSON-RPC for the
// go-sdk's server and the core's fast paths, and the core's answers back
// into bytes. It knows nothing of backends, catalogs or routing: package
// mux (the core) imports it, never the other way.
//
// The seam, what each side needs of the other:
//
// The stdio door (stdio.go): Stdio(in, out, opts) is the go-sdk transport
// of one session over any reader and writer (stdin and stdout, or a
// socket). The core asks of it:
//   - StdioTransport.Conn, to recognise a stdio session once the go-sdk
//     connected it, and CloseConn, to end it at once on shutdown;
//   - Conn.Notify, its own notifications, written in order, never
//     blocking, bounded for an agent that does not read (outq);
//   - Conn.RespondRaw and RespondError, the answers to the requests it
//     took as bytes;
//   - Conn.SetPassThrough, its hook that sees each request before the
//     go-sdk and may take it (the pass-through), and Conn.Begin, the
//     context of a request it took, cancelled with the agent's
//     notifications/cancelled or the connection's end.
//
// The door asks nothing of the core but that hook.
//
// Every door keeps the reason an agent gave for cancelling a request
// (CancelReason), which the core tells the backend.
package door

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// cancelReasons holds the reason the agent gave for cancelling a request
// in flight, by the request's extra (or an HTTP call's token), for the
// core to tell the backend.
var cancelReasons sync.Map // *mcp.RequestExtra, or an HTTP call's token (httpcancel.go) → string

// cancelReasonKeep is how long a cancelled request's reason is kept after
// its handler returned.
const cancelReasonKeep = 10 * time.Second

// KeepCancelReason keeps reason, the agent's for cancelling the request of
// key (its *mcp.RequestExtra, or an HTTP call's token), for CancelReason.
func KeepCancelReason(key any, reason string) { cancelReasons.Store(key, reason) }

// ForgetCancelReason drops key's reason once the core can no longer need
// it: the go-sdk tells the backend of a cancellation from another
// goroutine, maybe after the handler has returned (its own bound is 5 s).
func ForgetCancelReason(key any) {
	time.AfterFunc(cancelReasonKeep, func() { cancelReasons.Delete(key) })
}

// CancelReason is the reason the agent gave for cancelling the request of
// key, if it gave one.
func CancelReason(key any) (string, bool) {
	if r, ok := cancelReasons.Load(key); ok {
		return r.(string), true
	}
	return "", false
}

// WireError is err as the agent gets it: a JSON-RPC error with a code,
// whatever error a handler returned.
func WireError(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code != 0 {
		return err
	}
	fixed := &jsonrpc.Error{Code: codeFor(err.Error()), Message: err.Error()}
	if we != nil {
		fixed.Data = we.Data
	}
	return fixed
}

// codeFor gives an error the SDK sent without a code the one JSON-RPC
// means: its own checks of a request's shape and state are invalid
// requests, failures to decode params invalid params, and the rest
// internal errors.
func codeFor(msg string) int64 {
	switch {
	case strings.HasPrefix(msg, "handling '"), strings.Contains(msg, `missing required "params"`):
		return jsonrpc.CodeInvalidParams
	case strings.Contains(msg, "duplicate"), strings.Contains(msg, "invalid during session initialization"),
		strings.Contains(msg, " before "):
		return jsonrpc.CodeInvalidRequest
	}
	return jsonrpc.CodeInternalError
}

// CancelledRequest reads a notifications/cancelled: the id of the request
// it cancels, and the reason given, if any.
func CancelledRequest(n *jsonrpc.Request) (id jsonrpc.ID, reason string, ok bool) {
	var p struct {
		RequestID any    `json:"requestId"`
		Reason    string `json:"reason"`
	}
	if json.Unmarshal(n.Params, &p) != nil {
		return id, "", false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return id, "", false
	}
	return id, p.Reason, true
}

// AppendNotification appends to data the JSON-RPC notification of method
// with params raw.
func AppendNotification(data []byte, method string, raw json.RawMessage) []byte {
	data = slices.Grow(data, len(raw)+len(method)+40)
	data = append(data, `{"jsonrpc":"2.0","method":`...)
	data = strconv.AppendQuote(data, method)
	data = append(data, `,"params":`...)
	data = append(data, raw...)
	return append(data, '}')
}
