package door

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The response stream of a request on the HTTP fast path: what a backend
// sends about the request before its response (progress, log messages,
// and its requests to the agent, whose answers the agent POSTs in the
// same session) goes on it, in order, as events.

// streamKey carries a fast request's *Stream in its context.
type streamKey struct{}

// StreamOf is the response stream of the request on the fast path whose
// context is ctx, or nil.
func StreamOf(ctx context.Context) *Stream {
	if ctx == nil {
		return nil
	}
	hs, _ := ctx.Value(streamKey{}).(*Stream)
	return hs
}

// maxStreamEvents bounds what waits to be written on one response stream;
// past it, progress is dropped (the latest reaches the agent with the next
// one) and requests to the agent wait.
const maxStreamEvents = 64

// Stream is the response stream of one request the fast path took.
// The request's own goroutine (the HTTP handler's) runs the call: what
// comes about it before its response is written by a goroutine started
// with the first such message, so that a call with none (nearly every
// one) hops to no other goroutine and back.
type Stream struct {
	st   *HTTPSession  // the session's; nil for a stateless request
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

// Notify queues a notification about the stream's request, dropping it if
// the agent reads too slowly (only progress and log messages come here).
func (hs *Stream) Notify(method string, params any) {
	raw, err := json.Marshal(params)
	if err != nil {
		return
	}
	data := appendNotification(nil, method, raw)
	select {
	case hs.queue() <- data:
		hs.wake()
	case <-hs.done:
	default:
	}
}

// queue is hs.events, made if it was not.
func (hs *Stream) queue() chan []byte {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.events == nil {
		hs.events = make(chan []byte, maxStreamEvents)
	}
	return hs.events
}

// wake starts the writer of the stream's events, if none runs and the
// call has not returned.
func (hs *Stream) wake() {
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
func (hs *Stream) callReturned() {
	hs.mu.Lock()
	hs.over = true
	writer, stop := hs.writer, hs.stop
	hs.mu.Unlock()
	if writer != nil {
		close(stop)
		<-writer
	}
}

// askPrefix begins the ids of the core's requests on a fast stream:
// strings, where the go-sdk's own are numbers.
const askPrefix = "mcp-mux-"

// answered takes the agent's response to a request the core sent on a
// fast stream, reporting false if it is not one.
func (st *HTTPSession) answered(resp *jsonrpc.Response) bool {
	id, ok := resp.ID.Raw().(string)
	if !ok || !strings.HasPrefix(id, askPrefix) {
		return false
	}
	st.mu.Lock()
	ch := st.asks[id]
	delete(st.asks, id)
	st.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- resp
	return true
}

// Ask sends the agent, on the response stream hs of its request that a
// backend serves, the backend's request (method, params) and returns the
// agent's answer, decoded as R.
func Ask[R mcp.Result](ctx context.Context, hs *Stream, method string, params any) (R, error) {
	var zero R
	st := hs.st
	if st == nil {
		// A stateless request's: no later POST can name its session to
		// answer, so the request waits for its stream or ctx to end.
		st = &HTTPSession{}
	}
	st.mu.Lock()
	st.seq++
	id := askPrefix + strconv.FormatInt(st.seq, 10)
	ch := make(chan *jsonrpc.Response, 1)
	if st.asks == nil {
		st.asks = map[string]chan *jsonrpc.Response{}
	}
	st.asks[id] = ch
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		delete(st.asks, id)
		st.mu.Unlock()
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
