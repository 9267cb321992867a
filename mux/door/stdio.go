package door

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/wire"
	"github.com/mcp-mux/mcp-mux/mux/outq"
)

// The stdio door: newline-delimited JSON-RPC on stdin and stdout, as a connection of our own under the go-sdk server rather than
// the SDK's IOTransport, because the agent decides how it behaves:
//   - a line the SDK cannot decode would end the SDK's session; here it is
//     answered as JSON-RPC says (-32700 invalid JSON, -32600 not a JSON-RPC
//     message, or a batch, which MCP no longer has) and the session goes on;
//     each line is decoded once, by the SDK's own decoder;
//   - an agent that stops reading stdout must not stall mux or grow its
//     memory: writes never block the caller, and queued notifications are
//     bounded (see outq.Queue); while it reads, a backend's notifications
//     wait for it past paceAbove bytes queued (outq.Queue.Pace);
//   - requests read before stdin's EOF are answered before the session ends;
//   - no error leaves with code 0 (the SDK sends some of its own that way).

// StdioOptions tune the agent's connection.
type StdioOptions struct {
	// MaxLine bounds one incoming line; a longer one is answered with
	// -32600 and skipped. 0 means no bound.
	MaxLine int
	// Gone, if set, reports whether the agent is gone for good, not only
	// its stdin (a session's socket closed both ways): then nobody will
	// read the answers, and stdin's end does not wait for them.
	Gone func() bool
	// Drain bounds how long requests already read when stdin ends may take
	// to be answered before the session ends anyway.
	Drain time.Duration
	// Logger gets what the connection has to say (dropped notifications).
	Logger *log.Logger
	// PID is the process the session came from, when it is not this
	// one's stdin (a session of the shared mcp-mux): status shows it.
	PID int
}

// Stdio serves one agent session over in and out (stdin and stdout, or a
// socket's two directions). A pipe in non-blocking mode is read and
// written with raw system calls (wire.PipeIO).
func Stdio(in io.Reader, out io.Writer, opts StdioOptions) *StdioTransport {
	if f, ok := in.(*os.File); ok {
		in = wire.PipeIO(f)
	}
	if f, ok := out.(*os.File); ok {
		out = wire.PipeIO(f)
	}
	return &StdioTransport{in: in, out: out, opts: opts}
}

// StdioTransport is the go-sdk's transport of one stdio session: its
// server connects it once.
type StdioTransport struct {
	in   io.Reader
	out  io.Writer
	opts StdioOptions
	conn atomic.Pointer[Conn]
}

// Conn is the connection Connect made, nil before.
func (t *StdioTransport) Conn() *Conn { return t.conn.Load() }

// PID is the process the session came from (StdioOptions.PID), if not
// this one.
func (t *StdioTransport) PID() int { return t.opts.PID }

// CloseConn ends the connection at once, for a shutdown: the go-sdk then
// cancels the requests in flight rather than waiting for them.
func (t *StdioTransport) CloseConn() {
	if c := t.conn.Load(); c != nil {
		c.Close()
	}
}

func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &Conn{
		in:       bufio.NewReaderSize(t.in, 64*1024),
		opts:     t.opts,
		incoming: make(chan jsonrpc.Message),
		eof:      make(chan struct{}),
		closed:   make(chan struct{}),
		inflight: map[jsonrpc.ID]*Call{},
		room:     make(chan struct{}, 1),
	}
	c.ctx, c.stop = context.WithCancel(context.Background())
	logger := t.opts.Logger
	if logger == nil {
		logger = log.New(io.Discard)
	}
	c.out = outq.New(t.out, c.written, logger)
	// An agent that closed its end of stdout is gone, whether or not
	// stdin ends too: the session ends as at stdin's EOF, rather than
	// forwarding requests whose answers nobody reads. (Close waits for
	// this goroutine's queue, so it runs on its own.)
	c.out.OnBroken(func() {
		logger.Info("the agent closed its end of stdout: ending the session")
		go c.Close()
	})
	t.conn.Store(c)
	go c.readLoop()
	go c.out.Loop(c.closed)
	return c, nil
}

// maxInflight bounds the agent's requests that are read but not yet
// answered on stdout: an agent that writes requests and never reads the
// answers is not read from either once it has this many outstanding.
const maxInflight = outq.MaxInflight

// Conn is one stdio session's connection. Besides what the go-sdk reads
// and writes through it, the core sends on it directly (Notify,
// RespondRaw, RespondError) and may take requests before the go-sdk sees
// them (SetPassThrough).
type Conn struct {
	in   *bufio.Reader
	opts StdioOptions
	out  *outq.Queue

	incoming  chan jsonrpc.Message // the reader hands decoded messages to Read
	eof       chan struct{}        // closed when stdin ended and the drain is over
	closed    chan struct{}
	closeOnce sync.Once

	// pass takes the requests that go as bytes (SetPassThrough); set once
	// the core knows the session. ctx ends at Close: the requests it takes
	// end with the connection, as the go-sdk's handlers do.
	pass atomic.Pointer[passHooks]
	ctx  context.Context
	stop context.CancelFunc

	mu       sync.Mutex
	inflight map[jsonrpc.ID]*Call // requests read and not yet answered on stdout
	room     chan struct{}        // signalled when inflight shrinks
}

// Call is one of the agent's requests in flight.
type Call struct {
	// extra is given to the go-sdk with the request, which hands it to the
	// handler: it is how a handler finds its request's cancellation reason
	// (CancelReason), as the SDK tells a handler nothing else of it.
	extra     *mcp.RequestExtra
	cancelled bool               // the agent cancelled it: it gets no response
	answered  bool               // its response is queued: the agent may reuse the id once it has it
	cancel    context.CancelFunc // cancels it, if the pass-through took it (Begin)
	// stream is a subscriptions/listen: it is answered only when the
	// agent cancels it or the session ends, so stdin's end does not wait
	// for it.
	stream bool
}

// Extra is what the go-sdk would have handed the request's handler: the
// key of its cancellation reason (CancelReason).
func (call *Call) Extra() *mcp.RequestExtra { return call.extra }

// SetPassThrough makes take see every request read from now on before the
// go-sdk does: a request it takes (it reports true) is the core's to
// answer (RespondRaw, RespondError), and never reaches the go-sdk. The
// reader calls idle whenever it has handled all it read so far, before it
// may wait (for the agent's next bytes, for room, or at the end): what
// take held back goes then, several requests read at once in one write.
// Only the connection's reader calls take and idle.
func (c *Conn) SetPassThrough(take func(req *jsonrpc.Request, call *Call) bool, idle func()) {
	c.pass.Store(&passHooks{take, idle})
}

type passHooks struct {
	take func(*jsonrpc.Request, *Call) bool
	idle func()
}

// idle calls the pass-through's idle hook, if there is one.
func (c *Conn) idle() {
	if h := c.pass.Load(); h != nil && h.idle != nil {
		h.idle()
	}
}

// Begin starts the handling of call, a request the pass-through took: the
// context returned ends when the agent cancels it or the connection
// closes.
func (c *Conn) Begin(call *Call) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(c.ctx)
	c.mu.Lock()
	call.cancel = cancel
	c.mu.Unlock()
	return ctx, cancel
}

func (c *Conn) SessionID() string { return "" }

func (c *Conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-c.incoming:
		return msg, nil
	case <-c.eof:
		return nil, io.EOF
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write queues msg for stdout and returns at once: a stalled agent stalls
// only the writer goroutine.
func (c *Conn) Write(_ context.Context, msg jsonrpc.Message) error {
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	if r, ok := msg.(*jsonrpc.Response); ok && !c.answering(r.ID) {
		c.written(r.ID)
		return nil
	}
	if r, ok := msg.(*jsonrpc.Response); ok && r.Error != nil {
		if fixed := wireError(r.Error); fixed != r.Error {
			cp := *r
			cp.Error = fixed
			msg = &cp
		}
	}
	return c.out.Push(msg)
}

// answering notes that the response to id is being queued, and reports
// false if it must not be: the agent cancelled the request.
func (c *Conn) answering(id jsonrpc.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	call := c.inflight[id]
	if call != nil && call.cancelled {
		return false
	}
	if call != nil {
		call.answered = true
	}
	return true
}

// RespondRaw answers the agent's request id with result, a JSON value as
// a backend sent it.
func (c *Conn) RespondRaw(id jsonrpc.ID, result json.RawMessage) { c.respondRaw(id, result, false) }

// HoldRaw is RespondRaw, but the answer waits in the queue for the next
// RespondRaw or FlushHeld: a caller with more answers at hand gives them
// to the agent in one write.
func (c *Conn) HoldRaw(id jsonrpc.ID, result json.RawMessage) { c.respondRaw(id, result, true) }

func (c *Conn) respondRaw(id jsonrpc.ID, result json.RawMessage, hold bool) {
	if !c.answering(id) {
		c.written(id)
		return
	}
	data, err := outq.ResultLine(id, result)
	if err != nil {
		c.written(id)
		return
	}
	if hold {
		c.out.HoldResponse(id, data)
	} else {
		c.out.PushResponse(id, data)
	}
}

// FlushHeld writes what HoldRaw held.
func (c *Conn) FlushHeld() { c.out.FlushHeld() }

// RespondError answers the agent's request id with err.
func (c *Conn) RespondError(id jsonrpc.ID, err error) {
	_ = c.Write(context.Background(), &jsonrpc.Response{ID: id, Error: err})
}

// Notify sends a notification of the core's own: encoded here, not through the
// go-sdk's sending chain, and never blocking. A backend's notification
// handler delivers through it at once, and so keeps pace with a backend
// that floods: the go-sdk queues a backend's messages without bound behind
// a handler slower than its reader.
func (c *Conn) Notify(method string, params any) error {
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	data := append(appendNotification(make([]byte, 0, len(raw)+len(method)+48), method, raw), '\n')
	c.out.Pace(c.closed) // the backend waits while the agent catches up
	var key string
	var droppable bool
	if p, ok := params.(*mcp.ResourceUpdatedNotificationParams); ok {
		key, droppable = outq.UpdatedKey(p.URI, p.Meta[mcp.MetaKeySubscriptionID]), true // without decoding raw again
	} else {
		key, droppable = outq.Classify(method, raw)
	}
	c.out.PushLine(data, key, droppable)
	return nil
}

// Close ends the session's connection. What is queued for stdout gets a
// moment to go out (the answers to requests read before stdin's EOF), but
// Close never waits on an agent that does not read.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.out.Flush(closeFlush)
		close(c.closed)
		c.stop()
	})
	return nil
}

// closeFlush bounds how long Close waits for queued output.
const closeFlush = 500 * time.Millisecond

// readLoop reads stdin until it ends, answering what the SDK cannot take
// and handing it the rest. At EOF it waits (bounded by Drain) until the
// requests it read are answered, then lets Read report the EOF.
func (c *Conn) readLoop() {
	for {
		if c.in.Buffered() == 0 {
			c.idle() // what was read is handled: before a read that may wait
		}
		line, err := c.readLine()
		if len(line) > 0 {
			if msg := c.decode(line); msg != nil && !c.deliver(msg) {
				return
			}
		}
		if err != nil {
			c.idle()
			c.drain()
			close(c.eof)
			return
		}
	}
}

// deliver hands msg to Read, first waiting for room if it is a request
// and too many are outstanding. It reports false if the connection closed.
func (c *Conn) deliver(msg jsonrpc.Message) bool {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		call := &Call{extra: &mcp.RequestExtra{}, stream: req.Method == "subscriptions/listen"}
		req.Extra = call.extra
		for {
			c.mu.Lock()
			n := len(c.inflight)
			prev, inUse := c.inflight[req.ID]
			if inUse && prev.answered {
				// The agent has the response, maybe before the writer
				// noted it (written): the id is the agent's again.
				inUse = false
				n--
			}
			if n < maxInflight && !inUse {
				c.inflight[req.ID] = call
			}
			c.mu.Unlock()
			if inUse {
				// Refused as the go-sdk refuses one among its own requests;
				// it does not know those mux forwards itself.
				id, _ := json.Marshal(req.ID.Raw())
				c.reply(id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: request ID %v already in use", req.ID.Raw()))
				return true
			}
			if n < maxInflight {
				break
			}
			c.idle() // what is held back may be what makes room
			select {
			case <-c.room:
			case <-c.closed:
				return false
			}
		}
		if h := c.pass.Load(); h != nil && h.take(req, call) {
			return true
		}
	} else if ok && req.Method == "notifications/cancelled" {
		c.cancelled(req)
	}
	select {
	case c.incoming <- msg:
		return true
	case <-c.closed:
		return false
	}
}

// cancelled records the agent's cancellation of a request in flight: it
// gets no response (as MCP says), and its reason is kept for the backend.
// The go-sdk cancels the handler itself.
func (c *Conn) cancelled(n *jsonrpc.Request) {
	id, reason, ok := cancelledRequest(n)
	if !ok {
		return
	}
	c.mu.Lock()
	call := c.inflight[id]
	var cancel context.CancelFunc
	if call != nil {
		call.cancelled = true
		if reason != "" {
			cancelReasons.Store(call.extra, reason)
		}
		cancel = call.cancel
	}
	c.mu.Unlock()
	if cancel != nil {
		cancel() // forwarded as bytes: the go-sdk does not know it
	}
}

// written is called by the out queue once a response is on stdout (or
// dropped, for a cancelled request).
func (c *Conn) written(id jsonrpc.ID) {
	c.mu.Lock()
	call := c.inflight[id]
	if call != nil && call.cancelled {
		forgetCancelReason(call.extra) // kept a while: see there
	}
	if call != nil && (call.answered || call.cancelled) {
		// Not a request that reused the id after this one's response.
		delete(c.inflight, id)
	}
	c.mu.Unlock()
	select {
	case c.room <- struct{}{}:
	default:
	}
}

// drain waits until the requests read are answered on stdout, or Drain
// passed, or stdout stalls (an agent that closed stdin and does not read
// either cannot get the answers; it must not delay the exit).
func (c *Conn) drain() {
	deadline := time.After(c.opts.Drain)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		n := 0
		for _, call := range c.inflight {
			if !call.stream {
				n++
			}
		}
		c.mu.Unlock()
		if n == 0 || c.out.Stalled() || c.opts.Gone != nil && c.opts.Gone() {
			return
		}
		select {
		case <-c.room:
		case <-tick.C:
		case <-deadline:
			return
		case <-c.closed:
			return
		}
	}
}

// readLine returns the next line without its newline, or nil for a line
// over the limit (answered already) or a blank one.
func (c *Conn) readLine() ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := c.in.ReadSlice('\n')
		if !tooLong && c.opts.MaxLine > 0 && len(line)+len(chunk) > c.opts.MaxLine+1 {
			tooLong = true
			line = nil
		}
		if !tooLong {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			c.reply(nil, jsonrpc.CodeInvalidRequest, "message larger than max_message_size")
			return nil, err
		}
		return bytes.TrimSpace(line), err
	}
}

// decode returns the message in line, or nil after answering a line the
// SDK could not take.
func (c *Conn) decode(line []byte) jsonrpc.Message {
	msg, err := wire.DecodeMessage(line)
	if err == nil {
		return msg
	}
	if !json.Valid(line) {
		c.reply(nil, jsonrpc.CodeParseError, "Parse error: the message is not valid JSON")
		return nil
	}
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if line[0] != '{' || json.Unmarshal(line, &probe) != nil {
		c.reply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: expected one JSON-RPC 2.0 object (batches are not supported)")
		return nil
	}
	c.reply(validID(probe.ID), jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error())
	return nil
}

// validID returns id if it may be echoed in a response (string or number).
func validID(id json.RawMessage) json.RawMessage {
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9')) {
		return id
	}
	return nil
}

func (c *Conn) reply(id json.RawMessage, code int64, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	c.out.PushRaw(append(resp, '\n'), c.closed)
}
