// Package relay is the session side of a shared mcp-mux: the process an
// agent launches over stdio meets the user's long-lived mcp-mux (package
// rendezvous), says hello, and relays the agent's lines to it and its
// lines back, verbatim.
//
// The session outlives the long-lived process. If that process ends (a
// kill -9, a crash), each request of the agent's in flight is answered
// with an error that says so (it is never sent again: a tools/call may
// have done its work), the session meets a new process, replays what made
// the old one know it (the agent's initialize, notifications/initialized,
// its logging level, its subscriptions), swallows the answers to those,
// and goes on.
package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-mux/mcp-mux/backends/wire"
	"github.com/mcp-mux/mcp-mux/mux/rendezvous"
)

// Options are a session's.
type Options struct {
	Place rendezvous.Place
	Hello rendezvous.Hello
	// Spawn starts the long-lived process when none serves Place; its
	// channel, if any, is closed when that process ends.
	Spawn func() (<-chan struct{}, error)
	// Warn logs one line where the user looks.
	Warn func(msg string)
	// Drain bounds how long the session waits, after the agent's stdin
	// ends, for the answers to requests it sent.
	Drain time.Duration
	// MaxLine bounds what the session holds of one line of the agent's:
	// a longer one goes on in pieces, unread, for the long-lived process
	// to refuse as it refuses one on stdin. 0: 4 MiB.
	MaxLine int
}

// Relay is one session's connection to the long-lived process.
type Relay struct {
	o Options

	// wmu serializes writes to the connection: the agent's lines and the
	// replay after a reconnect. Held across a write to the socket only,
	// never while waiting for anything else.
	wmu sync.Mutex

	mu   sync.Mutex
	conn *stream
	rd   *bufio.Reader
	pid  int           // the long-lived process's
	up   chan struct{} // closed while conn is usable; remade when it is not
	down bool
	dead error // the session cannot go on

	inflight map[string]bool // the agent's requests sent, by raw id
	asked    map[string]bool // the long-lived process's requests to the agent
	swallow  map[string]bool // replayed requests, whose answers the agent never asked for
	replayN  int

	initLine, initializedLine, levelLine []byte
	subs                                 map[string][]byte // resources/subscribe by uri
	stdinDone                            bool
	stdinEnded                           chan struct{} // closed with stdinDone

	outMu sync.Mutex
	out   io.Writer
	// writing is when the write to the agent under way began (unix ns),
	// 0 when none is: an agent that stops reading blocks it (Blocked).
	writing atomic.Int64
}

// Connect meets the long-lived process of o.Place (starting it if
// needed) and says hello. An error means the session cannot be shared.
func Connect(o Options) (*Relay, error) {
	r := &Relay{o: o, inflight: map[string]bool{}, asked: map[string]bool{}, swallow: map[string]bool{}, subs: map[string][]byte{},
		stdinEnded: make(chan struct{})}
	c, rd, pid, err := r.meet(false)
	if err != nil {
		return nil, err
	}
	r.conn, r.rd, r.pid = c, rd, pid
	r.up = make(chan struct{})
	close(r.up)
	return r, nil
}

// PID is the long-lived process's the session talks to now.
func (r *Relay) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pid
}

// meet connects and says hello; a process that is ending is met again
// (its successor).
func (r *Relay) meet(replay bool) (*stream, *bufio.Reader, int, error) {
	h := r.o.Hello
	h.Replay = replay
	var last error
	for attempt := range 10 {
		c, err := rendezvous.Meet(r.o.Place, r.o.Spawn)
		if err != nil {
			return nil, nil, 0, err
		}
		c.SetDeadline(time.Now().Add(rendezvous.HelloTimeout))
		rd := bufio.NewReaderSize(c, 64<<10)
		var w *rendezvous.Welcome
		err = rendezvous.WriteHello(c, h)
		if err == nil {
			w, err = rendezvous.ReadWelcome(rd)
		}
		if err == nil && w.Refused == "" {
			c.SetDeadline(time.Time{})
			s := newStream(c, rd)
			if s.file != nil {
				rd = bufio.NewReaderSize(s, 64<<10)
			}
			return s, rd, w.PID, nil
		}
		c.Close()
		switch {
		case err != nil:
			last = fmt.Errorf("saying hello to the shared mcp-mux: %w", err)
		case w.Refused == rendezvous.RefusedStopping:
			// It lets its place go in a moment: meet the next one then.
			last = errors.New("the shared mcp-mux was ending")
			time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
			continue
		default:
			return nil, nil, 0, fmt.Errorf("the shared mcp-mux (pid %d) refused this session: %s", w.PID, w.Refused)
		}
	}
	return nil, nil, 0, last
}

// Run relays between the agent (in, out) and the long-lived process
// until the agent's stdin ends and its answers are written, the agent
// stops reading, or ctx ends.
func (r *Relay) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	r.out = out
	agentDone := make(chan struct{})
	go func() { // owned: ends at stdin's end or error, which Run's caller's exit brings
		defer close(agentDone)
		r.fromAgent(in)
	}()
	stop := context.AfterFunc(ctx, func() { r.closeConn() })
	defer stop()
	var drainTimer *time.Timer
	defer func() {
		if drainTimer != nil {
			drainTimer.Stop()
		}
	}()
	for {
		r.mu.Lock()
		rd := r.rd
		r.mu.Unlock()
		err := r.fromProcess(rd)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errAgentGone) {
			r.closeConn()
			return nil
		}
		r.mu.Lock()
		done := r.stdinDone
		r.mu.Unlock()
		if done {
			return nil // answered what it was asked, and closed
		}
		if err := r.reconnect(); err != nil {
			return err
		}
		select {
		case <-agentDone:
			// stdin ended while reconnecting: let the drain below run.
			if drainTimer == nil {
				drainTimer = time.AfterFunc(r.drain(), r.closeConn)
			}
		default:
		}
	}
}

// toAgent writes line to the agent's stdin (the session's stdout).
func (r *Relay) toAgent(line []byte) error {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	r.writing.Store(time.Now().UnixNano())
	defer r.writing.Store(0)
	_, err := r.out.Write(line)
	return err
}

// StdinEnded is closed once the agent's stdin has ended.
func (r *Relay) StdinEnded() <-chan struct{} { return r.stdinEnded }

// Blocked is how long the write to the agent under way has waited (0: no
// write is). A session that is ending, whose agent no longer reads, cannot
// give it what is left, and must not wait for it without end.
func (r *Relay) Blocked() time.Duration {
	began := r.writing.Load()
	if began == 0 {
		return 0
	}
	return time.Since(time.Unix(0, began))
}

func (r *Relay) drain() time.Duration {
	if r.o.Drain > 0 {
		return r.o.Drain + time.Second
	}
	return 5 * time.Second
}

var errAgentGone = errors.New("the agent stopped reading")

// maxAsked bounds the process's requests to the agent the session keeps
// waiting for an answer to.
const maxAsked = 1024

// fromProcess copies the long-lived process's lines to the agent until
// its connection ends.
func (r *Relay) fromProcess(rd *bufio.Reader) error {
	var long []byte // a line longer than rd's buffer, gathered
	for {
		chunk, err := rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			continue
		}
		line := chunk
		if len(long) > 0 {
			long = append(long, chunk...)
			line = long
		}
		if len(line) > 0 && r.fromProcessLine(line) {
			if werr := r.toAgent(line); werr != nil {
				return errAgentGone
			}
		}
		long = long[:0]
		if err != nil {
			return err
		}
	}
}

// fromProcessLine notes what a line of the long-lived process's is, and
// reports whether the agent is to see it.
func (r *Relay) fromProcessLine(line []byte) bool {
	m := peek(line)
	if !m.ok || m.id == nil {
		return true
	}
	id := string(m.id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.method != "" {
		if len(r.asked) >= maxAsked {
			// An agent that never answers: forget one (its late answer
			// is dropped; the process gave up on it long ago).
			for old := range r.asked {
				delete(r.asked, old)
				break
			}
		}
		r.asked[id] = true
		return true
	}
	if r.swallow[id] {
		delete(r.swallow, id)
		return false
	}
	delete(r.inflight, id)
	return true
}

// fromAgent sends the agent's lines to the long-lived process until stdin
// ends, then closes the connection's writing side: the process answers
// what it was asked and ends the session.
func (r *Relay) fromAgent(in io.Reader) {
	rd := bufio.NewReaderSize(in, 64<<10)
	limit := r.o.MaxLine
	if limit <= 0 {
		limit = 4 << 20
	}
	var line []byte
	streaming := false // the line passed limit: its pieces go on as they come
	for {
		chunk, err := rd.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		switch {
		case streaming:
			r.sendRaw(chunk)
		case full && len(line)+len(chunk) > limit:
			streaming = true
			r.sendRaw(append(line, chunk...))
			line = line[:0]
		default:
			line = append(line, chunk...)
		}
		if full {
			continue
		}
		if !streaming && len(line) > 0 {
			r.send(line)
		}
		line, streaming = line[:0], false
		if err != nil {
			break
		}
	}
	r.mu.Lock()
	r.stdinDone = true
	c := r.conn
	r.mu.Unlock()
	close(r.stdinEnded)
	r.wmu.Lock()
	c.closeWrite()
	r.wmu.Unlock()
	time.AfterFunc(r.drain(), r.closeConn)
}

// send notes what an agent's line is and sends it, after a reconnect if
// one is under way.
func (r *Relay) send(line []byte) {
	m := peek(line)
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	for r.down && r.dead == nil {
		up := r.up
		r.mu.Unlock()
		r.wmu.Unlock()
		<-up
		r.wmu.Lock()
		r.mu.Lock()
	}
	if r.dead != nil {
		r.mu.Unlock()
		return
	}
	if m.ok && m.id != nil && m.method == "" {
		// An answer to the long-lived process: to one that ended, it
		// goes nowhere.
		if !r.asked[string(m.id)] {
			r.mu.Unlock()
			return
		}
		delete(r.asked, string(m.id))
	}
	if m.ok {
		r.note(m, line)
	}
	c := r.conn
	r.mu.Unlock()
	c.Write(line) // a failure is the connection's end, which fromProcess sees
}

// sendRaw sends a piece of a line too long to hold, as it is.
func (r *Relay) sendRaw(b []byte) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	c, down := r.conn, r.down
	r.mu.Unlock()
	if !down {
		c.Write(b)
	}
}

// stream is a connection to the long-lived process after the hello: on
// Unix its socket as a file read and written with raw system calls.
type stream struct {
	c    net.Conn
	file *os.File
	rw   io.ReadWriteCloser
}

func newStream(c net.Conn, rd *bufio.Reader) *stream {
	if rd.Buffered() == 0 { // nothing of the process's read ahead into rd
		if f := rendezvous.File(c); f != nil {
			return &stream{file: f, rw: wire.PipeIO(f)}
		}
	}
	return &stream{c: c, rw: c}
}

func (s *stream) Read(b []byte) (int, error)  { return s.rw.Read(b) }
func (s *stream) Write(b []byte) (int, error) { return s.rw.Write(b) }
func (s *stream) Close() error                { return s.rw.Close() }

func (s *stream) closeWrite() {
	if s.file != nil {
		if rendezvous.CloseWrite(s.file) != nil {
			s.Close()
		}
		return
	}
	if cw, ok := s.c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		return
	}
	s.Close()
}

// note records an agent's request in flight, and what a replay needs.
// Called with r.mu held.
func (r *Relay) note(m msgShape, line []byte) {
	if m.id != nil && m.method != "" {
		r.inflight[string(m.id)] = true
	}
	keep := func() []byte { return append([]byte(nil), line...) }
	switch m.method {
	case "initialize":
		r.initLine = keep()
	case "notifications/initialized":
		r.initializedLine = keep()
	case "logging/setLevel":
		r.levelLine = keep()
	case "resources/subscribe":
		r.subs[m.uri] = keep()
	case "resources/unsubscribe":
		delete(r.subs, m.uri)
	}
}

func (r *Relay) closeConn() {
	r.mu.Lock()
	c := r.conn
	r.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// reconnect answers the requests in flight to the process that ended,
// meets a new one and replays the agent's session to it.
func (r *Relay) reconnect() error {
	r.mu.Lock()
	r.down = true
	r.up = make(chan struct{})
	pid := r.pid
	lost := make([][]byte, 0, len(r.inflight))
	for id := range r.inflight {
		lost = append(lost, []byte(id))
	}
	clear(r.inflight)
	clear(r.asked)
	clear(r.swallow)
	r.mu.Unlock()
	r.conn.Close()
	for _, id := range lost {
		msg := fmt.Sprintf("mcp-mux: the shared mcp-mux (pid %d) ended while this request was in flight; it was not retried", pid)
		line := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":%s}}`+"\n", id, strconv.Quote(msg))
		r.toAgent(line)
	}
	if r.o.Warn != nil {
		r.o.Warn(fmt.Sprintf("the shared mcp-mux (pid %d) ended; %d requests in flight were answered with an error; meeting a new one", pid, len(lost)))
	}
	c, rd, npid, err := r.meet(true)
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	defer close(r.up)
	r.down = false
	if err != nil {
		r.dead = err
		return fmt.Errorf("meeting a new shared mcp-mux: %w", err)
	}
	r.conn, r.rd, r.pid = c, rd, npid
	for _, line := range r.replay() {
		if _, err := c.Write(line); err != nil {
			break // the next read sees the end
		}
	}
	return nil
}

// replay is the agent's session as the new process must hear it, the
// requests among it under ids of mcp-mux's own. Called with r.mu held.
func (r *Relay) replay() [][]byte {
	var out [][]byte
	if r.initLine == nil {
		return nil // an agent of the current era: each request says it all
	}
	req := func(line []byte) []byte {
		m := peek(line)
		if m.id == nil {
			return line
		}
		r.replayN++
		id := strconv.Quote("mcp-mux-replay-" + strconv.Itoa(r.replayN))
		r.swallow[id] = true
		b := append([]byte(nil), line[:m.idAt[0]]...)
		b = append(b, id...)
		return append(b, line[m.idAt[1]:]...)
	}
	out = append(out, req(r.initLine))
	if r.initializedLine != nil {
		out = append(out, r.initializedLine)
	}
	if r.levelLine != nil {
		out = append(out, req(r.levelLine))
	}
	for _, l := range r.subs {
		out = append(out, req(l))
	}
	return out
}
