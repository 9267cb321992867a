package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/wire"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/mux/outq"
)

// The HTTP door's pass-through: a tools/call or resources/read POSTed in an
// HTTP session goes to its backend as bytes, as a stdio agent's does
// (passthrough.go), and the backend's result is the response as it sent
// it. The go-sdk's handler would make a logical stream, hand the message
// to the session's reader goroutine, decode it into types, run the handler
// in a goroutine of its own, encode the result and write it as an event:
// most of what a request cost in mcp-mux serving HTTP.
//
// What the go-sdk's path guarantees stays. The request goes through the
// same forward (routing, request_timeout, progress tokens, cancellation
// with the agent's reason, settling), and what the backend sends about it
// goes on its own response stream: its progress, and its requests to the
// agent (sampling, elicitation), whose answers the agent POSTs and this
// path takes back (askOnStream). The response is application/json when
// nothing came before it, else an event stream, as the transport allows.
// The origin, token, Host and body-size checks are the handler's, before
// either path. Anything else (an initialize, a GET, a DELETE, any other
// method, a batch, a request this path would answer with an error of
// mux's own) takes the go-sdk's path, unchanged.
//
// Sessions' idle time is mux's to keep (idleSessions), since requests that
// take this path never reach the go-sdk's timer.

// streamKey carries a fast request's *httpStream in its context.
type streamKey struct{}

func streamFrom(ctx context.Context) *httpStream {
	if ctx == nil {
		return nil
	}
	hs, _ := ctx.Value(streamKey{}).(*httpStream)
	return hs
}

// maxStreamEvents bounds what waits to be written on one response stream;
// past it, progress is dropped (the latest reaches the agent with the next
// one) and requests to the agent wait.
const maxStreamEvents = 64

// httpStream is the response stream of one request the fast path took.
// The request's own goroutine (the HTTP handler's) runs the call: what
// comes about it before its response is written by a goroutine started
// with the first such message, so that a call with none (nearly every
// one) hops to no other goroutine and back.
type httpStream struct {
	done chan struct{} // closed when the response is written: nothing more goes out
	// write writes one message to the stream, reporting false if it could
	// not (then the request is cancelled). Only the writer calls it until
	// the call returns, then only the request's goroutine.
	write func([]byte) bool
	fail  context.CancelFunc

	mu sync.Mutex
	// events are the JSON-RPC messages about the request, before its
	// response: made with the first (queue), as nearly every call has none.
	events chan []byte
	writer chan struct{} // closed when the writer has ended; nil until one starts
	stop   chan struct{} // closed to end the writer
	over   bool          // the call returned: no writer starts
}

// notify queues a notification about the stream's request, dropping it if
// the agent reads too slowly (only progress and log messages come here).
func (hs *httpStream) notify(method string, params any) {
	data, err := notificationJSON(method, params)
	if err != nil {
		return
	}
	select {
	case hs.queue() <- data:
		hs.wake()
	case <-hs.done:
	default:
	}
}

// queue is hs.events, made if it was not.
func (hs *httpStream) queue() chan []byte {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.events == nil {
		hs.events = make(chan []byte, maxStreamEvents)
	}
	return hs.events
}

// wake starts the writer of the stream's events, if none runs and the
// call has not returned.
func (hs *httpStream) wake() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.writer != nil || hs.over {
		return
	}
	writer, stop := make(chan struct{}), make(chan struct{})
	hs.writer, hs.stop = writer, stop
	events := hs.events // made: wake follows a queue
	go func() {
		defer close(writer)
		for {
			select {
			case data := <-events:
				if !hs.write(data) {
					hs.fail()
				}
			case <-stop:
				return
			}
		}
	}()
}

// callReturned ends the writer, if one started, once it has written what
// it took: the rest is the request's goroutine's to write.
func (hs *httpStream) callReturned() {
	hs.mu.Lock()
	hs.over = true
	writer, stop := hs.writer, hs.stop
	hs.mu.Unlock()
	if writer != nil {
		close(stop)
		<-writer
	}
}

func notificationJSON(method string, params any) ([]byte, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return door.AppendNotification(nil, method, raw), nil
}

// fastState is an HTTP session's requests on the fast path.
type fastState struct {
	mu    sync.Mutex
	calls map[jsonrpc.ID]*fastCall          // the agent's, in flight
	asks  map[string]chan *jsonrpc.Response // mux's to the agent, awaiting its answer
	seq   int64                             // numbers asks
	posts int                               // POSTs being served (either path)
	idle  time.Time                         // when the last POST ended (or the session began)
	ended bool                              // the session ended: no new calls
}

// fastCall is one of the agent's requests on the fast path.
type fastCall struct {
	extra  *mcp.RequestExtra // where the agent's reason for a cancellation is found
	cancel context.CancelFunc
	// cancelled: the agent cancelled it, and gets no response.
	cancelled bool
}

// add registers call as the agent's request id in flight, unless another
// is (inUse) or the session ended.
func (f *fastState) add(id jsonrpc.ID, call *fastCall) (inUse, ended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, inUse = f.calls[id]; inUse || f.ended {
		return inUse, f.ended
	}
	if f.calls == nil {
		f.calls = map[jsonrpc.ID]*fastCall{}
	}
	f.calls[id] = call
	return false, false
}

// remove ends call, the request id in flight.
func (f *fastState) remove(id jsonrpc.ID, call *fastCall) {
	f.mu.Lock()
	delete(f.calls, id)
	cancelled := call.cancelled
	f.mu.Unlock()
	if cancelled {
		door.ForgetCancelReason(call.extra)
	}
}

// askPrefix begins the ids of mux's requests on a fast stream: strings,
// where the go-sdk's own are numbers.
const askPrefix = "mcp-mux-"

// httpSession is the initialized HTTP session of the Mcp-Session-Id sid,
// or nil.
func (m *Mux) httpSession(sid string) *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.httpIDs[sid]
}

// startPOST and endPOST bracket every POST of an HTTP session, whichever
// path serves it: a session is idle only with none in progress.
func (s *session) startPOST() {
	s.fast.mu.Lock()
	s.fast.posts++
	s.fast.mu.Unlock()
}

func (s *session) endPOST() {
	s.fast.mu.Lock()
	s.fast.posts--
	s.fast.idle = time.Now()
	s.fast.mu.Unlock()
}

// idleSessions ends the HTTP sessions with no POST in progress for idle
// (http_session_idle), as the go-sdk's handler would with its own timer,
// checking a tenth of idle apart, until mux closes.
func (m *Mux) idleSessions(idle time.Duration) {
	tick := time.NewTicker(min(max(idle/10, 10*time.Millisecond), 10*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case now := <-tick.C:
			m.mu.Lock()
			var stale []*session
			for _, s := range m.httpIDs {
				s.fast.mu.Lock()
				if s.fast.posts == 0 && now.Sub(s.fast.idle) >= idle {
					stale = append(stale, s)
				}
				s.fast.mu.Unlock()
			}
			m.mu.Unlock()
			for _, s := range stale {
				m.log.Debug("HTTP session idle: ending it", "session", s.id, "idle", idle)
				s.ss.Close()
				m.sessionEnded(s.ss)
			}
		}
	}
}

// endFast cancels the session's requests on the fast path (it ended).
func (s *session) endFast() {
	s.fast.mu.Lock()
	s.fast.ended = true
	var cancels []context.CancelFunc
	for _, c := range s.fast.calls {
		cancels = append(cancels, c.cancel)
	}
	s.fast.mu.Unlock()
	for _, c := range cancels {
		c()
	}
}

// hostAllowed is the go-sdk handler's DNS rebinding check, made before
// the fast path too: a request that reached a loopback address must name
// a loopback host.
func hostAllowed(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return true
	}
	if tcp, ok := local.(*net.TCPAddr); ok {
		if !tcp.AddrPort().Addr().Unmap().IsLoopback() { // as below, without the string
			return true
		}
	} else if host, _, err := net.SplitHostPort(local.String()); err != nil || !config.IsLoopbackHost(host) {
		return true
	}
	reqHost := r.Host
	if h, _, err := net.SplitHostPort(reqHost); err == nil {
		reqHost = h
	}
	return config.IsLoopbackHost(strings.Trim(reqHost, "[]"))
}

// fastPOST serves r, a POST in HTTP session s, if the fast path takes it,
// and reports whether it did. If it did not, r's body is as it was, and
// msg is its message if it was read (for the go-sdk's path: httpcancel.go).
func (m *Mux) fastPOST(w http.ResponseWriter, r *http.Request, s *session, maxBody int64) (took bool, msg jsonrpc.Message) {
	if s.ss.InitializeParams() == nil || s.isModern() || !fastHeaders(r) ||
		r.Header.Get("Mcp-Method") != "" || r.Header.Get("Mcp-Name") != "" {
		return false, nil
	}
	if v := r.Header.Get("MCP-Protocol-Version"); v != "" && v != s.ss.InitializeParams().ProtocolVersion {
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
		took = s.answered(msg)
		if took {
			w.WriteHeader(http.StatusAccepted)
		}
	case *jsonrpc.Request:
		if !msg.IsCall() {
			took = msg.Method == "notifications/cancelled" && s.cancelFast(msg)
			if took {
				w.WriteHeader(http.StatusAccepted)
			}
			return took, msg
		}
		if msg.Method != "tools/call" && msg.Method != "resources/read" {
			return false, msg
		}
		// A call before any list waits, as on the go-sdk's path, for the
		// backends still starting (bounded by first_list_wait): an agent
		// that knows its tools' names calls before it lists.
		if m.waitStarted(r.Context()); !m.first.over.Load() {
			return false, msg
		}
		var pr passable
		if pr, took = (&passThrough{m: m, s: s}).fastCall(msg); took {
			m.serveFast(w, r, s, msg, pr)
		}
	}
	return took, msg
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
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "failed to read body", http.StatusBadRequest)
		}
		return nil, nil, false
	}
	restore = func() { r.Body = io.NopCloser(bytes.NewReader(body)) }
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

// readBody reads r's body, at most limit bytes of it (0: no limit).
func readBody(r *http.Request, limit int64) ([]byte, error) {
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

// serveFast runs req, which the pass-through took, and writes its response
// (and what came about it first) to w.
func (m *Mux) serveFast(w http.ResponseWriter, r *http.Request, s *session, req *jsonrpc.Request, pr passable) {
	s.lastActive.Store(time.Now().UnixNano())
	hs := &httpStream{done: make(chan struct{})}
	defer close(hs.done)
	call := &fastCall{extra: &mcp.RequestExtra{Header: r.Header}}
	// The request's context ends with the agent's connection (it could
	// not get the response: mux keeps no events to resume), its
	// cancellation, the session's end (both call.cancel), or mux closing
	// (it derives from m.ctx: ServeHTTP's BaseContext). boundWrites made
	// it cancellable: a context of its own here would cost every call
	// another link in its parent's children, and a done channel.
	ctx, cancel := requestContext(w, r)
	defer cancel()
	ctx = context.WithValue(context.WithValue(ctx, sessionKey{}, s), streamKey{}, hs)
	call.cancel = cancel
	// A stateless request's session (httpstateless.go) is its own: no
	// other request can name it to cancel it, and it ends with this one.
	if s.ss != nil {
		inUse, ended := s.fast.add(req.ID, call)
		if inUse {
			writeJSONError(w, http.StatusBadRequest, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("duplicate in-flight request ID %v", req.ID.Raw())})
			return
		}
		if ended {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		defer s.fast.remove(req.ID, call)
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
	res, err := m.fastForward(ctx, s, call, req, pr)
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
	s.fast.mu.Lock()
	cancelled := call.cancelled
	s.fast.mu.Unlock()
	if cancelled || r.Context().Err() != nil {
		if !sse {
			w.WriteHeader(http.StatusAccepted) // no response, as MCP says
		}
		return
	}
	data, err := responseJSON(req.ID, res, err)
	if err != nil {
		data, _ = responseJSON(req.ID, nil, err)
	}
	if sse {
		hs.write(data)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// fastForward runs req at its backend, in the request's goroutine, as work
// Close waits for.
func (m *Mux) fastForward(ctx context.Context, s *session, call *fastCall, req *jsonrpc.Request, pr passable) (json.RawMessage, error) {
	if !m.own() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcp-mux is closing"}
	}
	defer m.wg.Done()
	in := inbound{ss: s.ss, extra: call.extra, meta: pr.meta, method: req.Method, target: pr.target}
	if p := s.params; s.ss == nil && p != nil && p.ClientInfo != nil {
		in.client = p.ClientInfo.Name // a stateless request (httpstateless.go)
	}
	res, err := forwardBytes(ctx, m, pr.mem, in, pr.rawMeta, pr.fields)
	if err != nil {
		return nil, err
	}
	if req.Method == "tools/call" {
		m.calledTool(s, pr.target)
	}
	return m.finishResult(s, pr.mem, req.Method, res), nil
}

// responseJSON is the JSON-RPC response to id: result as the backend sent
// it, or err.
func responseJSON(id jsonrpc.ID, result json.RawMessage, err error) ([]byte, error) {
	if err == nil {
		data, err := outq.ResultLine(id, result)
		return bytes.TrimRight(data, "\n"), err
	}
	return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: door.WireError(err)})
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
func (s *session) cancelFast(n *jsonrpc.Request) bool {
	id, reason, ok := door.CancelledRequest(n)
	if !ok {
		return false
	}
	s.fast.mu.Lock()
	c := s.fast.calls[id]
	if c != nil {
		c.cancelled = true
		if reason != "" {
			door.KeepCancelReason(c.extra, reason)
		}
	}
	s.fast.mu.Unlock()
	if c == nil {
		return false
	}
	c.cancel()
	return true
}

// answered takes the agent's response to a request mux sent on a fast
// stream, reporting false if it is not one.
func (s *session) answered(resp *jsonrpc.Response) bool {
	id, ok := resp.ID.Raw().(string)
	if !ok || !strings.HasPrefix(id, askPrefix) {
		return false
	}
	s.fast.mu.Lock()
	ch := s.fast.asks[id]
	delete(s.fast.asks, id)
	s.fast.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- resp
	return true
}

// askOnStream sends the agent of s, on the response stream hs of its
// request that a backend serves, the backend's request (method, params)
// and returns the agent's answer, decoded as R.
func askOnStream[R mcp.Result](ctx context.Context, s *session, hs *httpStream, method string, params any) (R, error) {
	var zero R
	s.fast.mu.Lock()
	s.fast.seq++
	id := askPrefix + strconv.FormatInt(s.fast.seq, 10)
	ch := make(chan *jsonrpc.Response, 1)
	if s.fast.asks == nil {
		s.fast.asks = map[string]chan *jsonrpc.Response{}
	}
	s.fast.asks[id] = ch
	s.fast.mu.Unlock()
	defer func() {
		s.fast.mu.Lock()
		delete(s.fast.asks, id)
		s.fast.mu.Unlock()
	}()
	raw, err := json.Marshal(params)
	if err != nil {
		return zero, err
	}
	data := make([]byte, 0, len(raw)+len(method)+len(id)+48)
	data = append(data, `{"jsonrpc":"2.0","id":`...)
	data = strconv.AppendQuote(data, id)
	data = append(data, `,"method":`...)
	data = strconv.AppendQuote(data, method)
	data = append(data, `,"params":`...)
	data = append(data, raw...)
	data = append(data, '}')
	select {
	case hs.queue() <- data:
		hs.wake()
	case <-hs.done:
		return zero, mcp.ErrConnectionClosed
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	select {
	case resp := <-ch:
		if resp.Error != nil {
			return zero, resp.Error
		}
		var r R
		if err := json.Unmarshal(resp.Result, &r); err != nil {
			return zero, fmt.Errorf("the agent's answer to %s: %w", method, err)
		}
		return r, nil
	case <-hs.done:
		return zero, mcp.ErrConnectionClosed
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// requestContext is r's context and what cancels it: boundWrites made it
// cancellable for w. One it did not (none: HTTPHandler bounds them all)
// gets a context of its own.
func requestContext(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc) {
	if bw, ok := w.(*boundedWriter); ok {
		return r.Context(), bw.cancel
	}
	return context.WithCancel(r.Context())
}
