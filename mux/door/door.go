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
//     go-sdk and may take it (the pass-through), with the one the reader
//     calls when it has handled all it read (idle), and Conn.Begin, the
//     context of a request it took, cancelled with the agent's
//     notifications/cancelled or the connection's end; Conn.HoldRaw, an
//     answer that waits for the next to go in one write.
//
// The stdio door asks nothing of the core but that hook.
//
// The HTTP door (http.go, httpfast.go, stream.go, httpcancel.go,
// stateless.go): HTTP(opts, core) serves the endpoint, ServeHTTP a
// listener, Guard anything else behind the same checks (the metrics). The
// door does the Origin, token and Host checks, the body limit, the
// routing of profiles (/mcp/NAME, ProfileHeader) and tool lists
// (?tool_list=, ToolListHeader), the go-sdk's stateful and stateless
// handlers, the fast path's reading and writing (a response as JSON or as
// an event stream, duplicate ids, cancellation), and leaving out the
// go-sdk's response to a call the agent cancelled. It asks of the core,
// all in HTTPCore: the go-sdk server; whether a profile exists; whether
// the fast paths are open yet; the session of an Mcp-Session-Id, and
// whether its POSTs may take the fast path; to serve a call on the fast
// path (Call, Stateless), which the core does by forwarding it and
// handing the door its result (ServeCall); and to end a session the agent
// deleted. The core asks of it:
//   - HTTPSession, the door's state of one session, kept in the core's
//     record of it: Touch and Idle for http_session_idle (the core ends
//     idle sessions), End when the session ends;
//   - StreamOf, the response stream of a request on the fast path, where
//     Stream.Notify sends its progress and Ask the backend's requests to
//     the agent;
//   - AtRequestEnd, to end a session the go-sdk made for one stateless
//     request when the request is over;
//   - AgentMetas, what a current-era request's _meta says of its agent.
//
// The session door (session.go): SessionDoor takes the sessions of the
// user's agents that meet the shared mcp-mux at its rendezvous; after each
// one's hello it is the stdio door over the session's socket. It asks of
// the core Admit: for a hello, the stdio options and what serves the
// session (the Mux of its class), or why it is refused.
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
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cancelReasons holds the reason the agent gave for cancelling a request
// in flight, by the request's extra (or an HTTP call's token), for the
// core to tell the backend.
var cancelReasons sync.Map // *mcp.RequestExtra, or an HTTP call's token (httpcancel.go) → string

// cancelReasonKeep is how long a cancelled request's reason is kept after
// its handler returned.
const cancelReasonKeep = 10 * time.Second

// forgetCancelReason drops key's reason once the core can no longer need
// it: the go-sdk tells the backend of a cancellation from another
// goroutine, maybe after the handler has returned (its own bound is 5 s).
func forgetCancelReason(key any) {
	time.AfterFunc(cancelReasonKeep, func() { cancelReasons.Delete(key) })
}

// CancelReason is the reason the agent gave for cancelling the request
// whose handler got extra, if it gave one.
func CancelReason(extra *mcp.RequestExtra) (string, bool) {
	if r, ok := cancelReasons.Load(extra); ok {
		return r.(string), true
	}
	if extra != nil && extra.Header != nil {
		if token := extra.Header.Get(sdkCallHeader); token != "" { // a call on the go-sdk's path over HTTP
			if r, ok := cancelReasons.Load(token); ok {
				return r.(string), true
			}
		}
	}
	return "", false
}

// wireError is err as the agent gets it: a JSON-RPC error with a code,
// whatever error a handler returned.
func wireError(err error) error {
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

// cancelledRequest reads a notifications/cancelled: the id of the request
// it cancels, and the reason given, if any.
func cancelledRequest(n *jsonrpc.Request) (id jsonrpc.ID, reason string, ok bool) {
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

// appendNotification appends to data the JSON-RPC notification of method
// with params raw.
func appendNotification(data []byte, method string, raw json.RawMessage) []byte {
	data = slices.Grow(data, len(raw)+len(method)+40)
	data = append(data, `{"jsonrpc":"2.0","method":`...)
	data = strconv.AppendQuote(data, method)
	data = append(data, `,"params":`...)
	data = append(data, raw...)
	return append(data, '}')
}
