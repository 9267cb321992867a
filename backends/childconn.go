package backends

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
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// childTransport is the backend side of the MCP session: newline-delimited
// JSON-RPC on the child's stdin and stdout. It replaces mcp.IOTransport,
// which ends the whole session at the first line its decoder refuses: a
// backend's stray print, a malformed envelope or an oversized response
// would cost the connection, fail every request in flight and count as a
// crash.
type childTransport struct{ conn *childConn }

func (t childTransport) Connect(context.Context) (mcp.Connection, error) { return t.conn, nil }

// childConn decodes each stdout line exactly once, with the SDK's own
// decoder: what it refuses is skipped, and logged or counted (noise.go),
// so the connection admits exactly what the SDK can take and no line can
// end it. A refused line that
// is recognizably the response to one of our requests (and an oversized
// one, whose id is recovered from its head or tail) becomes an error
// response for that request, so the caller is told at once instead of
// waiting for its timeout.
//
// mcp.IOTransport's ioConn also does JSON-RPC batches (MCP no longer has
// them; a batch line is skipped as noise here) and has a sessionUpdated
// hook, which only server sessions call.
type childConn struct {
	name string // the backend's, for error messages
	log  *log.Logger
	max  int // bytes in one line, without its newline

	out io.ReadCloser  // the child's stdout; closing it must unblock Read (as an os.Pipe's does)
	in  io.WriteCloser // the child's stdin; must not interleave concurrent Writes (as an *os.File does not)

	// Read state: Read is only ever called by one goroutine at a time
	// (the jsonrpc2 reader), so these need no lock.
	r    *bufio.Reader
	line []byte // a line longer than r's buffer, assembled; reused
	tail []byte // the last tailKeep bytes of an oversized line; reused
	eof  bool

	closeOnce sync.Once
	closed    chan struct{}

	raw rawCalls // requests sent as bytes beside the go-sdk's (rawcall.go)

	// atIdle is what Read calls before it next may wait for the backend
	// (SentCall.FlushAtIdle), by key; only Read's goroutine touches it.
	atIdle map[any]func()

	noise *stdoutNoise // lines that are not JSON-RPC (noise.go)

	roots rootsAsks // its roots/list requests as read, and their answers (roots.go)

	// updated, if set, gets notifications/resources/updated straight from
	// Read, in order, instead of through the go-sdk (see takeUpdated).
	updated func(*mcp.ResourceUpdatedNotificationParams)

	// Backpressure: the go-sdk queues what Read returns without bound until
	// its handlers take it, so a backend that floods notifications faster
	// than mux handles them would grow mux's memory without end. Read lets
	// at most maxPending notifications be ahead of the handlers (handled
	// counts them off); past that it waits, and the backend waits on its
	// pipe, as it would with a slow client.
	pmu      sync.Mutex
	pending  int
	read     uint64        // notifications read (counted ones), ever
	done     uint64        // and handled
	progress chan struct{} // closed (and replaced) when handled counts one off: wakes every waiter
}

// maxPending bounds the notifications read from the backend and not yet
// handled.
const maxPending = 256

// leakWait is how long Read waits for the handlers without any progress
// before it takes the pending ones as never to be handled (the go-sdk drops
// a notification whose params do not decode without calling a handler).
const leakWait = 200 * time.Millisecond

// clientNotifications are the notifications the go-sdk's client hands to
// its handlers (and so to handled).
var clientNotifications = map[string]bool{
	"notifications/cancelled": true, "notifications/progress": true, "notifications/message": true,
	"notifications/resources/updated": true, "notifications/resources/list_changed": true,
	"notifications/tools/list_changed": true, "notifications/prompts/list_changed": true,
	"notifications/elicitation/complete": true, "notifications/subscriptions/acknowledged": true,
}

// ahead waits until a notification may be handed to the go-sdk.
func (c *childConn) ahead() {
	for {
		c.pmu.Lock()
		if c.pending < maxPending {
			c.pending++
			c.read++
			c.pmu.Unlock()
			return
		}
		progress := c.progress
		c.pmu.Unlock()
		select {
		case <-progress:
		case <-c.closed:
			return
		case <-time.After(leakWait):
			c.pmu.Lock()
			c.pending = 0
			c.pmu.Unlock()
		}
	}
}

// settle waits (at most d) until every notification read so far has been
// handled. The go-sdk hands a response to its caller at once but queues
// the notifications read before it, so without this a backend's progress
// or resources/updated sent before its response could reach the agent
// after it.
func (c *childConn) settle(d time.Duration) {
	c.pmu.Lock()
	target := c.read
	c.pmu.Unlock()
	var deadline <-chan time.Time
	for {
		c.pmu.Lock()
		settled := c.done >= target || c.pending == 0
		progress := c.progress
		c.pmu.Unlock()
		if settled {
			return
		}
		if deadline == nil {
			deadline = time.After(d)
		}
		select {
		case <-progress:
		case <-deadline:
			// What is still missing was most likely dropped by the go-sdk
			// undecoded (its handlers never see it): written off, so that
			// the next response does not wait for it again.
			c.pmu.Lock()
			if c.done < target {
				lost := int(target - c.done)
				c.done = target
				c.pending = max(0, c.pending-lost)
			}
			c.pmu.Unlock()
			return
		case <-c.closed:
			return
		}
	}
}

// handled is a client receiving middleware: it counts off each notification
// once its handler returned.
func (c *childConn) handled(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if clientNotifications[method] {
			c.pmu.Lock()
			if c.pending > 0 {
				c.pending--
			}
			c.done++
			close(c.progress)
			c.progress = make(chan struct{})
			c.pmu.Unlock()
		}
		return res, err
	}
}

// takeUpdated hands a notifications/resources/updated to c.updated itself
// and reports whether it did. A backend can send them by the ten thousand
// (a file watcher, a log tail), and through the go-sdk each one cost a
// decoder with a buffer of tens of KiB and a trip through its notification
// queue. The notifications read before it are handled first (settle), so
// the agent gets them in the order the backend sent them. Params that do
// not decode are left to the go-sdk, which drops them with a log line.
func (c *childConn) takeUpdated(msg jsonrpc.Message) bool {
	r, ok := msg.(*jsonrpc.Request)
	if !ok || c.updated == nil || r.IsCall() || r.Method != "notifications/resources/updated" {
		return false
	}
	var p mcp.ResourceUpdatedNotificationParams
	if len(r.Params) == 0 || json.Unmarshal(r.Params, &p) != nil {
		return false
	}
	c.settle(leakWait)
	c.updated(&p)
	return true
}

// headKeep and tailKeep bound what is kept of an oversized line to find its
// id: the go-sdk writes the id near the start, the TypeScript SDK last.
const (
	headKeep = 4096
	tailKeep = 4096
)

func newChildConn(name string, logger *log.Logger, out io.ReadCloser, in io.WriteCloser, max int) *childConn {
	return &childConn{
		name:     name,
		log:      logger,
		max:      max,
		out:      out,
		in:       in,
		r:        bufio.NewReaderSize(out, 64*1024),
		closed:   make(chan struct{}),
		progress: make(chan struct{}),
		noise:    newStdoutNoise(logger),
	}
}

func (c *childConn) SessionID() string { return "" }

// Read returns the next message the backend sent, or a synthesized error
// response for a request whose response could not be delivered. It returns
// io.EOF at the end of stdout or once the connection is closed.
func (c *childConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if c.eof {
			c.raw.end(mcp.ErrConnectionClosed)
			return nil, io.EOF
		}
		if len(c.atIdle) > 0 && !c.lineBuffered() {
			for key, f := range c.atIdle {
				delete(c.atIdle, key)
				f()
			}
		}
		line, size, over, err := c.readLine()
		if err != nil {
			c.eof = true
			if !errors.Is(err, io.EOF) && !c.isClosed() {
				c.raw.end(mcp.ErrConnectionClosed)
				return nil, fmt.Errorf("reading its stdout: %w", err)
			}
		}
		var msg jsonrpc.Message
		if over {
			msg = c.oversized(size)
		} else {
			msg = c.decode(line)
		}
		if msg != nil && (c.raw.take(msg) || c.takeUpdated(msg)) {
			msg = nil
		}
		if msg != nil {
			if r, ok := msg.(*jsonrpc.Request); ok {
				switch {
				case !r.IsCall() && clientNotifications[r.Method]:
					c.ahead()
				case r.IsCall() && r.Method == "roots/list":
					c.roots.note(false) // before what the backend sent after it is read
				}
			}
			return msg, nil
		}
		if c.eof {
			c.raw.end(mcp.ErrConnectionClosed)
			return nil, io.EOF
		}
	}
}

// lineBuffered reports whether a whole line is read already: the next
// readLine returns without waiting for the backend.
func (c *childConn) lineBuffered() bool {
	b, _ := c.r.Peek(c.r.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// readLine returns the next line without its line ending, valid until the
// next call, and its size; if the line was longer than c.max, it reports
// over instead (the line's head is then in c.line, its tail in c.tail). The
// error is that of the read that ended the line, if any.
func (c *childConn) readLine() (line []byte, size int, over bool, err error) {
	c.line = c.line[:0]
	for {
		chunk, err := c.r.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		if !full && !over && len(c.line) == 0 {
			// The whole line is in the reader's buffer: decode it from
			// there, without a copy.
			line := trimEOL(chunk)
			if len(line) <= c.max {
				return line, len(line), false, err
			}
		}
		body := chunk
		if !full {
			body = trimEOL(chunk)
		}
		size += len(body)
		switch {
		case over:
			c.keepTail(body)
		case size > c.max:
			over = true
			c.tail = c.tail[:0]
			c.keepTail(c.line)
			c.keepTail(body)
			if len(c.line) > headKeep {
				c.line = c.line[:headKeep]
			}
			c.line = append(c.line, body[:min(len(body), headKeep-len(c.line))]...)
		default:
			c.line = append(c.line, body...)
		}
		if full {
			continue // the same line goes on
		}
		return c.line, size, over, err
	}
}

// trimEOL drops a trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// keepTail appends p to c.tail, keeping only the last tailKeep bytes.
func (c *childConn) keepTail(p []byte) {
	if len(p) >= tailKeep {
		c.tail = append(c.tail[:0], p[len(p)-tailKeep:]...)
		return
	}
	if drop := len(c.tail) + len(p) - tailKeep; drop > 0 {
		c.tail = c.tail[:copy(c.tail, c.tail[drop:])]
	}
	c.tail = append(c.tail, p...)
}

// decode turns one line into a message, or logs why it cannot and returns
// the error response owed for it, or nil.
func (c *childConn) decode(line []byte) jsonrpc.Message {
	msg, err := wire.DecodeMessage(line)
	if err == nil {
		return msg
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] != '{' {
		c.noise.add(trimmed, nil)
		return nil
	}
	id, ok := wire.RecoverResponseID(trimmed, trimmed)
	if !ok {
		c.noise.add(trimmed, err)
		return nil
	}
	c.log.Warn("malformed response on stdout; failing its request", "id", id.Raw(), "error", err, "line", snippet(trimmed))
	return errorResponse(id, fmt.Sprintf("backend %s sent a malformed response: %s", c.name, truncate(err.Error(), 300)))
}

// oversized logs a dropped line of size bytes and returns the error
// response owed for it, or nil if it is not recognizably a response.
func (c *childConn) oversized(size int) jsonrpc.Message {
	id, ok := wire.RecoverResponseID(c.line, c.tail)
	if !ok {
		c.log.Warn("dropped a message larger than max_message_size", "bytes", size, "limit", c.max)
		return nil
	}
	c.log.Warn("dropped a response larger than max_message_size; failing its request", "id", id.Raw(), "bytes", size, "limit", c.max)
	return errorResponse(id, fmt.Sprintf("backend %s sent a response of %d bytes, over max_message_size (%d bytes)", c.name, size, c.max))
}

// snippet is the start of a line, for the log, without converting all of
// a line that may be megabytes long.
func snippet(line []byte) string {
	const n = 200
	return truncate(string(line[:min(len(line), n+utf8.UTFMax)]), n)
}

func errorResponse(id jsonrpc.ID, msg string) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}}
}

// Write sends msg as one line, in one Write call: an *os.File holds its
// own write lock until all of a Write is written, so concurrent lines never
// interleave, and no lock of ours is held across the pipe write.
func (c *childConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(withCancelReason(ctx, msg))
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	if _, err := c.in.Write(append(data, '\n')); err != nil {
		if c.isClosed() {
			return mcp.ErrConnectionClosed
		}
		return fmt.Errorf("writing to its stdin: %w", err)
	}
	return nil
}

// Close closes the child's stdin (asking it to exit, as mcp.IOTransport
// did) and our end of its stdout, which unblocks a pending Read.
func (c *childConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		c.raw.end(mcp.ErrConnectionClosed)
		c.noise.end()
		// The backend may have closed them already, on its way down.
		err = errors.Join(ignoreClosed(c.in.Close()), ignoreClosed(c.out.Close()))
	})
	return err
}

func ignoreClosed(err error) error {
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}

func (c *childConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}
