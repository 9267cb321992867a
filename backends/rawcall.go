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
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// Raw calls are requests whose params are already JSON and whose result is
// wanted as JSON: mux forwards nearly all of an agent's traffic
// (tools/call, resources/read) this way, because the go-sdk's typed round
// trip (decode the params, encode them, decode the result, encode it again)
// was most of what a request cost in mcp-mux, and because the types keep
// only the fields they know. They share the connection with the go-sdk's
// client session: their ids are strings of our own ("mcp-mux-raw-N"), which
// the SDK's integer ids never are. A stdio backend's responses to them are
// taken off the stream (childConn.Read) before the SDK sees them; a remote
// one's are read as the roundTripper passes them on (rawTap, sseCounter),
// and the SDK drops them, ids it never sent. Everything else the backend
// sends (progress, requests to the client, notifications) still goes
// through the SDK's session.

// rawIDPrefix starts the id of every raw call.
const rawIDPrefix = "mcp-mux-raw-"

// rawCalls is a connection's raw calls in flight.
type rawCalls struct {
	mu      sync.Mutex
	seq     uint64
	waiting map[string]rawWaiter
	down    error // set once the connection ended: no call is sent or waits any more
}

// rawWaiter is where a raw call's answer goes: to a caller waiting on
// reply, or to answered (a SentCall's), called by whoever took the call
// off waiting.
type rawWaiter struct {
	reply    chan *jsonrpc.Response
	answered func(*jsonrpc.Response)
}

// CallRaw sends the backend the request method with params (a JSON object,
// or nil) and returns the result as the backend sent it. A JSON-RPC error
// from the backend is returned as a *jsonrpc.Error; if ctx ends first, the
// backend is sent notifications/cancelled (with the reason ctx carries, see
// WithCancelReason) and ctx's error is returned, as the go-sdk's calls do.
func (b *Backend) CallRaw(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	b = b.real()
	if b.remote != nil {
		if b.Modern() {
			params = b.withRequestMeta(params)
		}
		return b.remote.callRaw(ctx, b.conn, method, params)
	}
	return b.conn.callRaw(ctx, method, params)
}

// callRaw is CallRaw to a remote backend. The request goes out through the
// go-sdk's connection, as the session's own do (same HTTP session, headers,
// sign-in); its response, on the POST's body or the event stream, is taken
// for gate's raw calls as the roundTripper passes it to the go-sdk (see
// rawTap), which drops a response to an id it never sent.
func (r *remote) callRaw(ctx context.Context, gate *childConn, method string, params json.RawMessage) (json.RawMessage, error) {
	id, reply, err := gate.raw.start(ctx)
	if err != nil {
		return nil, err
	}
	rid, _ := jsonrpc.MakeID(id)
	cancel := func() {
		wctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cancelWriteTimeout)
		defer stop()
		_ = r.conn.Write(wctx, cancelledNotice(ctx, id))
	}
	if err := r.conn.Write(context.WithValue(ctx, rawCallKey{}, id), &jsonrpc.Request{ID: rid, Method: method, Params: params}); err != nil {
		gate.raw.forget(id)
		if ctx.Err() != nil {
			// The POST waits for its response's headers, which a server
			// may send only once it has something to say: the request
			// may be at work there already.
			go cancel()
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("calling %q: %w", method, r.explain(err))
	}
	return gate.raw.await(ctx, gate.name, method, id, reply, cancel)
}

// withRequestMeta is params with the per-request _meta that a remote
// backend of the current era requires on every request (its protocol
// version, mux's client info and capabilities), where params lack it, as
// the go-sdk's session adds it to its own requests. The requests mux
// forwards carry it already (mux's backendMeta); its own lists do not.
func (b *Backend) withRequestMeta(params json.RawMessage) json.RawMessage {
	key := []byte(`"` + mcp.MetaKeyProtocolVersion + `"`)
	if bytes.Contains(params, key) {
		return params
	}
	var fields map[string]json.RawMessage
	if len(bytes.TrimSpace(params)) > 0 && json.Unmarshal(params, &fields) != nil {
		return params // not an object: the backend says so
	}
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	var meta map[string]any
	if m, ok := fields["_meta"]; ok && json.Unmarshal(m, &meta) != nil {
		return params
	}
	if meta == nil {
		meta = map[string]any{}
	}
	meta[mcp.MetaKeyProtocolVersion] = b.init.ProtocolVersion
	if _, ok := meta[mcp.MetaKeyClientInfo]; !ok && b.remote.clientInfo != nil {
		meta[mcp.MetaKeyClientInfo] = b.remote.clientInfo
	}
	if _, ok := meta[mcp.MetaKeyClientCapabilities]; !ok {
		caps := b.caps
		if caps == nil {
			caps = &mcp.ClientCapabilities{}
		}
		meta[mcp.MetaKeyClientCapabilities] = caps
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return params
	}
	fields["_meta"] = m
	out, err := json.Marshal(fields)
	if err != nil {
		return params
	}
	return out
}

// cancelWriteTimeout bounds the POST of a raw call's notifications/cancelled
// to a remote backend.
const cancelWriteTimeout = 5 * time.Second

func (c *childConn) callRaw(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	id, reply, err := c.raw.start(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.in.Write(rawLine(id, method, params)); err != nil {
		c.raw.forget(id)
		if c.isClosed() {
			return nil, fmt.Errorf("%w: calling %q", mcp.ErrConnectionClosed, method)
		}
		return nil, fmt.Errorf("writing to its stdin: %w", err)
	}
	// Off the caller's path, as the go-sdk does: a backend that does not
	// read its stdin must not hold the caller past its deadline.
	return c.raw.await(ctx, c.name, method, id, reply, func() { c.cancelRaw(ctx, id) })
}

// rawLine is the line of the raw call id.
func rawLine(id, method string, params json.RawMessage) []byte {
	line := make([]byte, 0, len(params)+len(method)+len(id)+64)
	line = append(line, `{"jsonrpc":"2.0","id":"`...)
	line = append(line, id...)
	line = append(line, `","method":`...)
	line = strconv.AppendQuote(line, method)
	if params != nil {
		line = append(line, `,"params":`...)
		line = append(line, params...)
	}
	return append(line, "}\n"...)
}

// SentCall is a raw call to a stdio backend that nobody waits for: its
// answer goes to a function, called from the reader of the backend's
// stdout (NewSentCall). The agent's reader sends requests this way itself
// (SendLines) rather than through another goroutine, and the backend's
// reader answers the agent, as a byte relay's two copies would.
type SentCall struct {
	c        *childConn
	answered func(*jsonrpc.Response)
	id       string
}

// NewSentCall is a raw call to b whose answer goes to answered, or nil if
// b cannot take one: a remote backend, or a stdin that is not a pipe (no
// TryWrite: see wire.PipeIO).
func (b *Backend) NewSentCall(answered func(*jsonrpc.Response)) *SentCall {
	b = b.real()
	if b.remote != nil {
		return nil
	}
	if _, ok := b.conn.in.(interface{ TryWrite([]byte) (bool, error) }); !ok {
		return nil
	}
	return &SentCall{c: b.conn, answered: answered}
}

// Register gives the call its id, and reports false if ctx ended or the
// connection did. From then on answered gets the backend's answer (or nil,
// should the connection end first), exactly once, unless Claim takes the
// call first.
func (sc *SentCall) Register(ctx context.Context) bool {
	id, err := sc.c.raw.startFunc(ctx, sc.answered)
	sc.id = id
	return err == nil
}

// Line is the registered call's line, for SendLines.
func (sc *SentCall) Line(method string, params json.RawMessage) []byte {
	return rawLine(sc.id, method, params)
}

// SendLines writes lines, whole lines of registered calls (SentCall.Line),
// to the backend's stdin, and never waits: what the pipe takes at once
// goes now, in writes of whole lines of at most PipeAtomic bytes each, and
// the rest from a goroutine of its own, which waits for the pipe until it
// takes them or the connection ends. (A write that fails is the
// connection's end, which its reader finds too: every call still waiting
// is then answered as failed.)
func (b *Backend) SendLines(lines []byte) {
	b = b.real()
	c := b.conn
	tw := c.in.(interface{ TryWrite([]byte) (bool, error) })
	for len(lines) > 0 {
		n := chunkOfLines(lines, wire.PipeAtomic)
		if n == 0 {
			break
		}
		if wrote, err := tw.TryWrite(lines[:n]); !wrote || err != nil {
			break
		}
		lines = lines[n:]
	}
	if len(lines) > 0 {
		go func() { _, _ = c.in.Write(lines) }()
	}
}

// chunkOfLines is the length of the longest run of whole lines at the start
// of b (each ending in a newline) that is at most max bytes, or 0.
func chunkOfLines(b []byte, max int) int {
	if len(b) <= max {
		return len(b)
	}
	return bytes.LastIndexByte(b[:max], '\n') + 1
}

// MoreToRead reports whether the backend's reader has a whole line more
// read already. Only answered may ask (it runs on that reader): an answer
// it gives the agent may then wait for the next one (FlushAtIdle), and
// the two go in one write.
func (sc *SentCall) MoreToRead() bool { return sc.c.lineBuffered() }

// FlushAtIdle has the backend's reader call flush before it next may wait
// for the backend: once for each key, however often it is asked. Only
// answered may ask.
func (sc *SentCall) FlushAtIdle(key any, flush func()) {
	c := sc.c
	if c.atIdle == nil {
		c.atIdle = map[any]func(){}
	}
	c.atIdle[key] = flush
}

// Claim takes the registered call back before its answer came: it
// reports whether answered will now never be called.
func (sc *SentCall) Claim() bool { return sc.c.raw.claim(sc.id) }

// Cancel tells the backend, off the caller's path, that the call (sent,
// and claimed) was cancelled, with the reason ctx carries.
func (sc *SentCall) Cancel(ctx context.Context) {
	go sc.c.cancelRaw(ctx, sc.id)
}

// Result is what CallRaw would have returned for r, the call's answer (nil:
// the connection ended first).
func (sc *SentCall) Result(method string, r *jsonrpc.Response) (json.RawMessage, error) {
	return sc.c.raw.result(sc.c.name, method, r)
}

// cancelRaw tells the backend that the raw call id was cancelled.
func (c *childConn) cancelRaw(ctx context.Context, id string) {
	data, err := jsonrpc.EncodeMessage(cancelledNotice(ctx, id))
	if err != nil {
		return
	}
	_, _ = c.in.Write(append(data, '\n'))
}

// cancelledNotice is notifications/cancelled for the raw call id, whose
// ctx ended, with the reason ctx carries.
func cancelledNotice(ctx context.Context, id string) jsonrpc.Message {
	p, _ := json.Marshal(mcp.CancelledParams{Reason: ctx.Err().Error(), RequestID: id})
	return withCancelReason(ctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: p})
}

// start registers a raw call: its id, and where its response arrives.
func (rc *rawCalls) start(ctx context.Context) (string, chan *jsonrpc.Response, error) {
	reply := make(chan *jsonrpc.Response, 1)
	id, err := rc.register(ctx, rawWaiter{reply: reply})
	return id, reply, err
}

// startFunc registers a raw call whose response goes to answered.
func (rc *rawCalls) startFunc(ctx context.Context, answered func(*jsonrpc.Response)) (string, error) {
	return rc.register(ctx, rawWaiter{answered: answered})
}

func (rc *rawCalls) register(ctx context.Context, w rawWaiter) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.down != nil {
		return "", rc.down
	}
	rc.seq++
	id := rawIDPrefix + strconv.FormatUint(rc.seq, 10)
	if rc.waiting == nil {
		rc.waiting = map[string]rawWaiter{}
	}
	rc.waiting[id] = w
	return id, nil
}

// await waits for the response to the raw call id (to method, of the
// backend name), sent: its result, or its error; if ctx ends first, the
// call is given up and cancel tells the backend, off the caller's path.
func (rc *rawCalls) await(ctx context.Context, name, method, id string, reply chan *jsonrpc.Response, cancel func()) (json.RawMessage, error) {
	select {
	case r := <-reply:
		return rc.result(name, method, r)
	case <-ctx.Done():
		rc.forget(id)
		go cancel()
		return nil, ctx.Err()
	}
}

// result is what a raw call to method (of the backend name) returns for
// its answer r: its result, or its error; nil is the connection's end.
func (rc *rawCalls) result(name, method string, r *jsonrpc.Response) (json.RawMessage, error) {
	if r == nil {
		return nil, rc.downErr(method)
	}
	if r.Error != nil {
		var je *jsonrpc.Error
		if errors.As(r.Error, &je) {
			return nil, je
		}
		return nil, fmt.Errorf("calling %q: %w", method, r.Error)
	}
	if res := bytes.TrimSpace(r.Result); len(res) == 0 || res[0] != '{' {
		// Every MCP result is an object; the go-sdk's types would have
		// refused this one too.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("backend %s sent a result that is not an object: %s", name, snippet(res))}
	}
	return r.Result, nil
}

// claim takes the raw call id off waiting, and reports whether it was
// there: its answer is then the claimer's to give.
func (rc *rawCalls) claim(id string) bool {
	rc.mu.Lock()
	_, ok := rc.waiting[id]
	delete(rc.waiting, id)
	rc.mu.Unlock()
	return ok
}

func (rc *rawCalls) forget(id string) {
	rc.mu.Lock()
	delete(rc.waiting, id)
	rc.mu.Unlock()
}

func (rc *rawCalls) downErr(method string) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return fmt.Errorf("%w: calling %q", rc.down, method)
}

// take hands msg to the raw call it answers, and reports whether it was
// the response to one (answered, or given up on: the go-sdk must not see
// an id it never sent).
func (rc *rawCalls) take(msg jsonrpc.Message) bool {
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		return false
	}
	id, ok := r.ID.Raw().(string)
	if !ok || !strings.HasPrefix(id, rawIDPrefix) {
		return false
	}
	rc.mu.Lock()
	w, ok := rc.waiting[id]
	delete(rc.waiting, id)
	rc.mu.Unlock()
	switch {
	case !ok:
	case w.answered != nil:
		w.answered(r)
	default:
		w.reply <- r
	}
	return true
}

// end fails every raw call in flight: the connection ended.
func (rc *rawCalls) end(why error) {
	var answer []func(*jsonrpc.Response)
	rc.mu.Lock()
	if rc.down == nil {
		rc.down = why
	}
	for id, w := range rc.waiting {
		if w.answered != nil {
			answer = append(answer, w.answered)
		} else {
			w.reply <- nil
		}
		delete(rc.waiting, id)
	}
	rc.mu.Unlock()
	for _, answered := range answer {
		answered(nil) // not holding mu: it reads downErr
	}
}
