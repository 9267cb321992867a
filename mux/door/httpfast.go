package door

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/wire"
	"github.com/mcp-mux/mcp-mux/mux/outq"
)

// The HTTP door's fast path: a tools/call or resources/read POSTed in an
// HTTP session goes to its backend as bytes, as a stdio agent's does (the
// core's pass-through), and the backend's result is the response as it
// sent it. The go-sdk's handler would make a logical stream, hand the
// message to the session's reader goroutine, decode it into types, run the
// handler in a goroutine of its own, encode the result and write it as an
// event: most of what a request cost in mcp-mux serving HTTP.
//
// What the go-sdk's path guarantees stays. The core forwards the request
// as it forwards any (routing, request_timeout, progress tokens,
// cancellation with the agent's reason, settling), and what the backend
// sends about it goes on its own response stream: its progress
// (Stream.Notify), and its requests to the agent (sampling, elicitation),
// whose answers the agent POSTs and this path takes back (Ask). The
// response is application/json when nothing came before it, else an event
// stream, as the transport allows. The origin, token, Host and body-size
// checks are the handler's, before either path. Anything else (an
// initialize, a GET, a DELETE, any other method, a batch, a request the
// core would answer with an error of its own) takes the go-sdk's path,
// unchanged.
//
// Sessions' idle time is the core's to keep (HTTPSession.Idle), since
// requests that take this path never reach the go-sdk's timer.

// HTTPSession is the door's state of one HTTP session with an
// Mcp-Session-Id: its requests on the fast path, and its calls on the
// go-sdk's (httpcancel.go). The zero value is ready; Touch starts its idle
// time.
type HTTPSession struct {
	mu    sync.Mutex
	calls map[jsonrpc.ID]*httpCall          // the agent's, in flight
	asks  map[string]chan *jsonrpc.Response // the core's to the agent, awaiting its answer
	seq   int64                             // numbers asks
	posts int                               // POSTs being served (either path)
	idle  time.Time                         // when the last POST ended (or the session began)
	ended bool                              // the session ended: no new calls

	// token is the name of the [[token]] whose request made the session
	// ("" for http_token, or none needed), once bound (tokens.go).
	token      string
	tokenBound bool

	sdk sdkCalls // its calls on the go-sdk's path (httpcancel.go)
}

// httpCall is one of the agent's requests on the fast path.
type httpCall struct {
	extra  *mcp.RequestExtra // where the agent's reason for a cancellation is found
	cancel context.CancelFunc
	// cancelled: the agent cancelled it, and gets no response.
	cancelled bool
}

// add registers call as the agent's request id in flight, unless another
// is (inUse) or the session ended.
func (st *HTTPSession) add(id jsonrpc.ID, call *httpCall) (inUse, ended bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, inUse = st.calls[id]; inUse || st.ended {
		return inUse, st.ended
	}
	if st.calls == nil {
		st.calls = map[jsonrpc.ID]*httpCall{}
	}
	st.calls[id] = call
	return false, false
}

// remove ends call, the request id in flight.
func (st *HTTPSession) remove(id jsonrpc.ID, call *httpCall) {
	st.mu.Lock()
	delete(st.calls, id)
	cancelled := call.cancelled
	st.mu.Unlock()
	if cancelled {
		forgetCancelReason(call.extra)
	}
}

// startPOST and endPOST bracket every POST of an HTTP session, whichever
// path serves it: a session is idle only with none in progress.
func (st *HTTPSession) startPOST() {
	st.mu.Lock()
	st.posts++
	st.mu.Unlock()
}

func (st *HTTPSession) endPOST() {
	st.mu.Lock()
	st.posts--
	st.idle = time.Now()
	st.mu.Unlock()
}

// Touch starts the session's idle time: it began now.
func (st *HTTPSession) Touch() {
	st.mu.Lock()
	st.idle = time.Now()
	st.mu.Unlock()
}

// Idle reports whether the session has had no POST in progress for d by
// now (http_session_idle), as the go-sdk's handler would judge with its
// own timer.
func (st *HTTPSession) Idle(now time.Time, d time.Duration) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.posts == 0 && now.Sub(st.idle) >= d
}

// End cancels the session's requests on the fast path (it ended).
func (st *HTTPSession) End() {
	st.mu.Lock()
	st.ended = true
	var cancels []context.CancelFunc
	for _, c := range st.calls {
		cancels = append(cancels, c.cancel)
	}
	st.mu.Unlock()
	for _, c := range cancels {
		c()
	}
}

// fastPOST serves r, a POST in HTTP session s, if the fast path takes it,
// and reports whether it did. If it did not, r's body is as it was, and
// msg is its message if it was read (for the go-sdk's path: httpcancel.go).
func fastPOST[S any](w http.ResponseWriter, r *http.Request, maxBody int64, core *HTTPCore[S], s S, st *HTTPSession) (took bool, msg jsonrpc.Message) {
	if !fastHeaders(r) || r.Header.Get("Mcp-Method") != "" || r.Header.Get("Mcp-Name") != "" ||
		!core.Fast(s, r.Header.Get("MCP-Protocol-Version")) {
		return false, nil
	}
	msg, restore, ok := fastBody(w, r, maxBody)
	if !ok {
		return true, nil // answered
	}
	defer func() {
		if !took {
			restore()
		}
	}()
	if msg == nil {
		return false, nil
	}
	switch msg := msg.(type) {
	case *jsonrpc.Response:
		took = st.answered(msg)
		if took {
			w.WriteHeader(http.StatusAccepted)
		}
	case *jsonrpc.Request:
		if !msg.IsCall() {
			took = msg.Method == "notifications/cancelled" && st.cancelFast(msg)
			if took {
				w.WriteHeader(http.StatusAccepted)
			}
			return took, msg
		}
		if msg.Method != "tools/call" && msg.Method != "resources/read" {
			return false, msg
		}
		took = core.Call(w, r, s, msg)
	}
	return took, msg
}

// statelessPOST serves r, a request of the current era without a session,
// if it is a POST the fast path takes (serve), and reports whether it did.
// If it did not, r's body is as it was.
func statelessPOST(w http.ResponseWriter, r *http.Request, maxBody int64, serve func(http.ResponseWriter, *http.Request, *jsonrpc.Request) bool) bool {
	method := r.Header.Get("Mcp-Method")
	if r.Method != http.MethodPost || !hostAllowed(r) || !fastHeaders(r) ||
		(method != "tools/call" && method != "resources/read") || r.Header.Get("Mcp-Name") == "" {
		return false
	}
	msg, restore, ok := fastBody(w, r, maxBody)
	if !ok {
		return true // answered
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method == method && serve(w, r, req) {
		return true
	}
	restore()
	return false
}

// fastHeaders reports whether r's headers let a fast path take it: a JSON
// body, an Accept of both JSON and event streams (as the go-sdk's handler
// requires), and no stream to resume.
func fastHeaders(r *http.Request) bool {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(ct), "application/json") || r.Header.Get("Last-Event-ID") != "" {
		return false
	}
	jsonOK, streamOK := accepts(r.Header.Values("Accept"))
	return jsonOK && streamOK
}

// fastBody reads r's body for a fast path: the one message in it, or nil
// for a body the go-sdk's path answers (empty, a batch, not JSON-RPC), and
// restore, which puts the body back for that path. If the body could not
// be read (or was over maxBody), the answer is written and ok is false.
func fastBody(w http.ResponseWriter, r *http.Request, maxBody int64) (msg jsonrpc.Message, restore func(), ok bool) {
	body, err := readBody(r, maxBody)
	if err != nil {
		bodyError(w, err)
		return nil, nil, false
	}
	restore = func() { r.Body = &heldBody{Reader: bytes.NewReader(body), data: body} }
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, restore, true
	}
	msg, err = wire.DecodeMessage(trimmed)
	if err != nil {
		return nil, restore, true
	}
	return msg, restore, true
}

// bodyError answers a request whose body could not be read (readBody's
// err), as the go-sdk's handler does.
func bodyError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
	} else {
		http.Error(w, "failed to read body", http.StatusBadRequest)
	}
}

// readBody reads r's body, at most limit bytes of it (0: no limit). A body
// read already (heldBody) is not read again.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if h, ok := r.Body.(*heldBody); ok && h.Len() == len(h.data) {
		return h.data, nil // within limit: it was read with it
	}
	var body io.Reader = r.Body
	if limit > 0 {
		body = io.LimitReader(r.Body, limit+1)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	return data, nil
}

// accepts reports whether the Accept values take application/json and
// text/event-stream, as the go-sdk's handler requires of a POST.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			t, _, _ = strings.Cut(t, ";")
			switch strings.TrimSpace(t) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// ServeCall runs the call id, which the core's fast path took, and writes
// its response (and what came about it first) to w. st is its session's
// state, nil for a stateless request (whose session is its own: no other
// request can name it to cancel it, and it ends with this one). run
// forwards the call: its context ends with the agent's connection (it
// could not get the response: nothing is kept to resume), its
// cancellation, the session's end, or the core closing (it derives from
// ServeHTTP's base), and extra is what its handler would have had of the
// go-sdk.
func ServeCall(w http.ResponseWriter, r *http.Request, st *HTTPSession, id jsonrpc.ID, run func(ctx context.Context, extra *mcp.RequestExtra) (json.RawMessage, error)) {
	hs := &Stream{st: st, done: make(chan struct{})}
	defer close(hs.done)
	call := &httpCall{extra: &mcp.RequestExtra{Header: r.Header}}
	// boundWrites made the request's context cancellable: a context of
	// its own here would cost every call another link in its parent's
	// children, and a done channel.
	ctx, cancel := requestContext(w, r)
	defer cancel()
	ctx = context.WithValue(ctx, streamKey{}, hs)
	call.cancel = cancel
	if st != nil {
		inUse, ended := st.add(id, call)
		if inUse {
			writeJSONError(w, http.StatusBadRequest, id, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("duplicate in-flight request ID %v", id.Raw())})
			return
		}
		if ended {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		defer st.remove(id, call)
	}

	sse := false
	hs.fail = cancel
	hs.write = func(data []byte) bool {
		if !sse {
			sse = true
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache, no-transform")
			w.WriteHeader(http.StatusOK)
		}
		buf := make([]byte, 0, len(data)+24)
		buf = append(buf, "event: message\ndata: "...)
		buf = append(buf, data...)
		buf = append(buf, "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return false
		}
		return http.NewResponseController(w).Flush() == nil
	}
	res, err := run(ctx, call.extra)
	hs.callReturned()
	// What the backend sent before its response goes first.
	hs.mu.Lock()
	events := hs.events // nil if nothing came: the loop ends at once
	hs.mu.Unlock()
	for drained := false; !drained; {
		select {
		case data := <-events:
			hs.write(data)
		default:
			drained = true
		}
	}
	cancelled := false
	if st != nil {
		st.mu.Lock()
		cancelled = call.cancelled
		st.mu.Unlock()
	}
	if cancelled || r.Context().Err() != nil {
		if !sse {
			w.WriteHeader(http.StatusAccepted) // no response, as MCP says
		}
		return
	}
	data, err := responseJSON(id, res, err)
	if err != nil {
		data, _ = responseJSON(id, nil, err)
	}
	if sse {
		hs.write(data)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// responseJSON is the JSON-RPC response to id: result as the backend sent
// it, or err.
func responseJSON(id jsonrpc.ID, result json.RawMessage, err error) ([]byte, error) {
	if err == nil {
		data, err := outq.ResultLine(id, result)
		return bytes.TrimRight(data, "\n"), err
	}
	return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: wireError(err)})
}

// writeJSONError writes a JSON-RPC error response with an HTTP status, as
// the go-sdk's handler does for a request it refuses.
func writeJSONError(w http.ResponseWriter, status int, id jsonrpc.ID, jerr *jsonrpc.Error) {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: jerr})
	if err != nil {
		http.Error(w, jerr.Message, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}

// cancelFast takes the agent's notifications/cancelled of a request on
// the fast path: it cancels it, keeping the reason for the backend, and
// the agent gets no response. It reports false for any other request.
func (st *HTTPSession) cancelFast(n *jsonrpc.Request) bool {
	id, reason, ok := cancelledRequest(n)
	if !ok {
		return false
	}
	st.mu.Lock()
	c := st.calls[id]
	if c != nil {
		c.cancelled = true
		if reason != "" {
			cancelReasons.Store(c.extra, reason)
		}
	}
	st.mu.Unlock()
	if c == nil {
		return false
	}
	c.cancel()
	return true
}

// requestContext is r's context and what cancels it: boundWrites made it
// cancellable for w. One it did not (none: HTTP bounds them all) gets a
// context of its own.
func requestContext(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc) {
	if bw, ok := w.(*boundedWriter); ok {
		return r.Context(), bw.cancel
	}
	return context.WithCancel(r.Context())
}
