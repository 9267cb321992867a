// Package control is mcp-mux's local control endpoint: every running
// mcp-mux, a stdio one an agent launched included, answers on an endpoint
// only its user can open (a unix socket of mode 0600 in a directory of
// mode 0700; a named pipe with the user's ACL on Windows), and `mcp-mux
// status` finds them and asks each for its status document.
//
// The protocol is one exchange per connection: the client writes one line,
// "status", the server writes one JSON document (Document, versioned) and
// closes. The server never waits on the mux: it asks for the document,
// which is built under the mux's locks briefly, then writes it with a
// deadline, holding no lock.
package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// Version is the status document's: a client reads the fields it knows of
// a newer one and says it is newer.
const Version = 1

// DirEnv names the directory of the endpoints in place of the user's
// runtime directory (tests: their mcp-mux processes stay apart from the
// user's). On Windows it makes the pipes' names its own.
const DirEnv = "MCP_MUX_CONTROL_DIR"

// Document is one mcp-mux as `mcp-mux status` shows it.
type Document struct {
	Version int       `json:"version"`
	PID     int       `json:"pid"`
	Config  string    `json:"config"`
	Started time.Time `json:"started"`
	Uptime  float64   `json:"uptime_seconds"`
	// Threads is how many OS threads run its Go code at once
	// (GOMAXPROCS): 1 unless the environment set another, or serve --http
	// has several requests in flight (mux/cores).
	Threads  int       `json:"threads"`
	Sessions []Session `json:"sessions"`
	Backends []Backend `json:"backends"`
	// Metrics is the URL this mcp-mux serves Prometheus metrics on for
	// [mux] metrics_listen, if it does: a second one of the same config
	// finds the port taken and names the process that has it.
	Metrics string `json:"metrics,omitempty"`
	// Shared: this is the long-lived mcp-mux that the stdio sessions of
	// the user's agents share (one per config file); Sessions say which
	// process of an agent's each is.
	Shared bool `json:"shared,omitempty"`
}

// Session is one agent session: Client is its clientInfo's name and version.
type Session struct {
	ID       string `json:"id"`
	Client   string `json:"client,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	// PID is the session process an agent launched, for a session of the
	// shared mcp-mux; Profile its --profile; Backends those it used.
	PID      int      `json:"pid,omitempty"`
	Profile  string   `json:"profile,omitempty"`
	Backends []string `json:"backends,omitempty"`
	// Token is the name of the [[token]] an HTTP session came with
	// (never its value); "" for http_token, or none.
	Token string `json:"token,omitempty"`
}

// Backend is one backend: its state as mcp-mux://backends reports it, and
// the requests forwarded to it (calls, those that ended in an error, the
// latency percentiles of the recent ones in milliseconds).
type Backend struct {
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Since     time.Time `json:"since"`
	PID       int       `json:"pid,omitempty"`
	Restarts  int       `json:"restarts"`
	LastError string    `json:"last_error,omitempty"`
	Calls     int64     `json:"calls"`
	Errors    int64     `json:"errors"`
	P50       float64   `json:"p50_ms"`
	P95       float64   `json:"p95_ms"`
}

// Millis is d in milliseconds, to the microsecond.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

const (
	// ioTimeout bounds each exchange on either side: a client that does
	// not read costs one goroutine for this long, no more.
	ioTimeout = 2 * time.Second
	// maxConns bounds the exchanges served at once; more are closed.
	maxConns = 8
	// maxDocument bounds what a client reads.
	maxDocument = 8 << 20
	request     = "status"
)

// Server serves the status document on this process's endpoint until
// Close, which also removes the endpoint.
type Server struct {
	ln       net.Listener
	addr     string
	document func() Document
	cleanup  func() // removes what listen made

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Listen opens this process's endpoint and serves document on it.
func Listen(document func() Document) (*Server, error) {
	ln, addr, cleanup, err := listen()
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, addr: addr, document: document, cleanup: cleanup, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the endpoint: the socket's path, or the pipe's name.
func (s *Server) Addr() string { return s.addr }

// Close stops the listener and every exchange, waits for their goroutines
// and removes the endpoint. It may be called more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	s.cleanup()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of descriptors): try again shortly
			// rather than spin or give up the endpoint.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.closed || len(s.conns) >= maxConns {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serve(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// serve answers one exchange on c.
func (s *Server) serve(c net.Conn) {
	c.SetDeadline(time.Now().Add(ioTimeout))
	line, err := bufio.NewReaderSize(io.LimitReader(c, 256), 256).ReadString('\n')
	if err != nil {
		return
	}
	var v any
	if strings.TrimSpace(line) == request {
		v = s.document()
	} else {
		v = map[string]any{"version": Version, "error": fmt.Sprintf("unknown request %q (this mcp-mux answers %q)", strings.TrimSpace(line), request)}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	c.Write(append(data, '\n'))
}

// Endpoint is one running mcp-mux's endpoint, as Find found it.
type Endpoint struct {
	PID  int
	Addr string
}

// Find lists the endpoints of this user's running mcp-mux processes,
// ordered by pid. An endpoint of a process that is gone is removed; one
// that is not this user's alone (another owner, another mode) is skipped,
// and warn is told why.
func Find(warn func(string)) ([]Endpoint, error) { return find(warn) }

// ErrGone is Query's error for an endpoint whose process is gone (or no
// longer listens); the endpoint was removed.
var ErrGone = errors.New("that mcp-mux is no longer running")

// Query asks ep for its status document.
func Query(ep Endpoint) (*Document, error) {
	c, err := dial(ep)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c, request+"\n"); err != nil {
		return nil, fmt.Errorf("asking mcp-mux %d for its status: %w", ep.PID, err)
	}
	data, err := io.ReadAll(io.LimitReader(c, maxDocument))
	if err != nil {
		return nil, fmt.Errorf("reading mcp-mux %d's status: %w", ep.PID, err)
	}
	var doc struct {
		Document
		Error string `json:"error"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("mcp-mux %d's status is not JSON: %w", ep.PID, err)
	}
	if doc.Error != "" {
		return nil, fmt.Errorf("mcp-mux %d: %s", ep.PID, doc.Error)
	}
	if doc.Version < 1 {
		return nil, fmt.Errorf("mcp-mux %d answered a status of no known version", ep.PID)
	}
	return &doc.Document, nil
}
