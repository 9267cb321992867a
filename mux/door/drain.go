package door

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Draining: how serve --http ends on SIGTERM, so that a balancer or an
// orchestrator can take the instance out without its agents losing a
// call. When ServeHTTP's context ends, at once: ReadyPath answers 503, and
// a new session or request gets 503 with Retry-After (what a POST brings
// that is not a request, an answer of the agent's or a notification, and
// a DELETE still go through: the calls in flight may need them). The
// requests in flight get until DrainTimeout to finish; then the event
// streams end telling the client how to reconnect, the listener closes,
// and whatever is left is cut.

// DrainRetryAfter is what a client refused while draining is told to wait
// (Retry-After): by then a balancer has seen ReadyPath fail, or the
// instance is gone, and the retry reaches another one.
const DrainRetryAfter = 5 * time.Second

// drainReconnect is what an event stream the drain ends tells its client
// to wait before reconnecting (retry:): the instance is gone by then.
const drainReconnect = time.Second

// drainingBit marks Drain.state once the drain has begun; the bits below it
// count the requests in flight.
const drainingBit = 1 << 62

// Drain is the drain of one HTTP serving, shared by its handler (HTTP),
// its probes (Probes) and ServeHTTP, which begins it. A nil *Drain never
// drains.
type Drain struct {
	state atomic.Int64  // drainingBit | requests in flight
	quiet chan struct{} // a request ended while draining (cap 1)

	mu      sync.Mutex
	streams map[*endingStream]struct{} // the event streams to end
	ended   bool                       // they were ended: a new one ends at once
	enders  sync.WaitGroup             // the goroutines ending them

	took time.Duration // from the drain's beginning to its end
	left int64         // requests still in flight when it ended
}

// NewDrain is a drain not begun.
func NewDrain() *Drain { return &Drain{quiet: make(chan struct{}, 1)} }

// Draining reports whether the drain has begun.
func (d *Drain) Draining() bool { return d != nil && d.state.Load()&drainingBit != 0 }

// Result is how long the drain took and how many requests were still in
// flight when it ended (cut by DrainTimeout or a second signal).
func (d *Drain) Result() (took time.Duration, left int64) {
	if d == nil {
		return 0, 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.took, d.left
}

// enter counts a request in flight, reporting whether the drain has begun.
// Counted with one atomic add, not a lock: every request pays it.
func (d *Drain) enter() bool {
	return d != nil && d.state.Add(1)&drainingBit != 0
}

// leave ends a request enter counted.
func (d *Drain) leave() {
	if d != nil && d.state.Add(-1) == drainingBit {
		select {
		case d.quiet <- struct{}{}:
		default:
		}
	}
}

// begin begins the drain: readiness fails and new requests are refused
// from now on. It reports false if the drain had begun already.
func (d *Drain) begin() bool {
	for {
		v := d.state.Load()
		if v&drainingBit != 0 {
			return false
		}
		if d.state.CompareAndSwap(v, v|drainingBit) {
			return true
		}
	}
}

// endStreams ends every event stream, once the requests in flight are
// over: until then they carry what the backends send (a list change, a
// resource's update), and a client told to reconnect now would only meet
// this instance's 503. One that begins later ends at once.
func (d *Drain) endStreams() {
	d.mu.Lock()
	d.ended = true
	streams := d.streams
	d.streams = nil
	for s := range streams {
		d.endLocked(s)
	}
	d.mu.Unlock()
}

// streamsEnded waits until the streams' last events are written, up to
// timeout or until stop is closed.
func (d *Drain) streamsEnded(timeout time.Duration, stop <-chan struct{}) {
	done := make(chan struct{})
	go func() { // ends with the enders, which ServeHTTP waits for
		d.enders.Wait()
		close(done)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-stop:
	}
}

// endLocked ends s in a goroutine of its own: a write of the stream's
// blocked on an agent that does not read holds its lock until the write's
// bound, and must not hold up the others.
func (d *Drain) endLocked(s *endingStream) {
	d.enders.Add(1)
	go func() {
		defer d.enders.Done()
		s.end()
	}()
}

// wait waits until no request is in flight, timeout has passed, or stop is
// closed, and records the result.
func (d *Drain) wait(began time.Time, timeout time.Duration, stop <-chan struct{}) {
	timer := time.NewTimer(max(timeout-time.Since(began), 0))
	defer timer.Stop()
wait:
	for d.state.Load() != drainingBit {
		select {
		case <-d.quiet:
		case <-timer.C:
			break wait
		case <-stop:
			break wait
		}
	}
	d.mu.Lock()
	d.took, d.left = time.Since(began), d.state.Load()&^drainingBit
	d.mu.Unlock()
}

// refuse answers a request that came while draining: 503, and when to try
// again (RFC 9110 §10.2.3), on a connection closed after it so that the
// retry goes to the balancer anew.
func refuse(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(int(DrainRetryAfter/time.Second)))
	w.Header().Set("Connection", "close")
	http.Error(w, "Service Unavailable: this mcp-mux is shutting down; retry in a few seconds (another instance may answer)", http.StatusServiceUnavailable)
}

// mayFinish reports whether r, which came while draining, may still be
// served: what a call in flight may need of its agent (a POST of a
// response or a notification: an answer to a request the call sent, a
// cancellation) and a DELETE. A new session, a new request and a GET are
// not. r's body is as it was.
func mayFinish(r *http.Request, maxBody int64) bool {
	switch r.Method {
	case http.MethodDelete:
		return true
	case http.MethodPost:
	default:
		return false
	}
	body, err := readBody(r, maxBody)
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return false
	}
	req, isReq := msg.(*jsonrpc.Request)
	return !isReq || !req.IsCall()
}

// endingStream is the writer of an event stream the drain ends: a GET
// stream of a handshake-era session, or a subscriptions/listen. What the
// go-sdk's handler writes to it and the drain's last event take turns.
type endingStream struct {
	http.ResponseWriter
	last   []byte // the stream's last event
	cancel func() // ends the request: the go-sdk's handler returns

	mu    sync.Mutex
	wrote bool // the response began: its header is out
	ended bool // nothing more is written
}

var errDrained = errors.New("the event stream was ended: mcp-mux is shutting down")

func (s *endingStream) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.wrote = true
		s.ResponseWriter.WriteHeader(code)
	}
}

func (s *endingStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return 0, errDrained
	}
	s.wrote = true
	return s.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController.Flush calls.
func (s *endingStream) FlushError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errDrained
	}
	return http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *endingStream) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// end writes the stream's last event, if its response began (one that has
// not has no header out: the go-sdk's handler, ending, answers it), and
// ends the request.
func (s *endingStream) end() {
	s.mu.Lock()
	if !s.ended {
		s.ended = true
		if s.wrote {
			if _, err := s.ResponseWriter.Write(s.last); err == nil {
				http.NewResponseController(s.ResponseWriter).Flush()
			}
		}
	}
	s.mu.Unlock()
	s.cancel()
}

// stream makes w, the writer of r's event stream, one the drain ends with
// last, and returns it and what to call when r's handler returns. Once
// the drain has begun it ends at once.
func (d *Drain) stream(w http.ResponseWriter, r *http.Request, last []byte) (http.ResponseWriter, func()) {
	if d == nil {
		return w, func() {}
	}
	_, cancel := requestContext(w, r)
	s := &endingStream{ResponseWriter: w, last: last, cancel: cancel}
	// A stream lasts as long as its client listens: the drain does not
	// wait for it, it ends it.
	d.leave()
	d.mu.Lock()
	if d.ended {
		d.endLocked(s)
	} else {
		if d.streams == nil {
			d.streams = map[*endingStream]struct{}{}
		}
		d.streams[s] = struct{}{}
	}
	d.mu.Unlock()
	return s, func() {
		// Nothing may be written once the handler returned: net/http
		// has finished the response.
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
		d.mu.Lock()
		delete(d.streams, s)
		d.mu.Unlock()
		d.state.Add(1) // for the handler's leave
	}
}

// reconnectEvent ends a GET stream of the handshake era: "If the server
// closes the connection without terminating the stream, it SHOULD follow
// the same polling behavior as described for POST requests: sending a
// retry field and allowing the client to reconnect" (transports,
// 2025-11-25, "Listening for Messages from the Server"). The client waits
// that long, then GETs again: another instance answers 404 for the
// session, and the client initializes a new one, as after a restart.
var reconnectEvent = []byte("retry: " + strconv.Itoa(int(drainReconnect/time.Millisecond)) + "\n\n")

// listenEnd is the last event of the subscriptions/listen request id:
// "When the server ends a subscription on its own initiative (for example,
// during shutdown), it SHOULD respond to the original subscriptions/listen
// request with a completion result before closing the stream" (2026-07-28,
// subscriptions, "Graceful Closure"); the client listens again, on
// another instance.
func listenEnd(id jsonrpc.ID) []byte {
	raw, err := json.Marshal(id.Raw())
	if err != nil {
		return nil
	}
	result := `{"resultType":"complete","_meta":{"` + mcp.MetaKeySubscriptionID + `":` + string(raw) + `}}`
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: json.RawMessage(result)})
	if err != nil {
		return nil
	}
	event := make([]byte, 0, len(data)+24)
	event = append(event, "event: message\ndata: "...)
	event = append(event, data...)
	return append(event, "\n\n"...)
}

// listenStream makes w, the writer of r's subscriptions/listen, one the
// drain ends with the listen's completion; nil if r was answered (its body
// could not be read).
func listenStream(w http.ResponseWriter, r *http.Request, o HTTPOptions) (http.ResponseWriter, func()) {
	msg, restore, ok := fastBody(w, r, o.MaxBody)
	if !ok {
		return nil, nil
	}
	restore()
	req, isReq := msg.(*jsonrpc.Request)
	if !isReq || !req.IsCall() {
		return w, func() {}
	}
	return o.Drain.stream(w, r, listenEnd(req.ID))
}
