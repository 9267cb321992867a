package door

import (
	"bufio"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/mcp-mux/mcp-mux/mux/rendezvous"
)

// SessionDoor takes the sessions of the user's agents that meet the
// shared mcp-mux (mux/rendezvous): each says hello on its socket, and from
// then on is a stdio session over it. Admit is the core's: for a hello,
// the options of its stdio door and what serves it (the Mux of its
// class), or why not. serve is called once: with the session's door, or
// with nil if the session went away before it began.
type SessionDoor struct {
	Admit  func(h *rendezvous.Hello) (opts StdioOptions, serve func(*StdioTransport) error, refused string)
	Logger *log.Logger

	mu    sync.Mutex
	conns map[net.Conn]io.Closer // what ends each session's connection
	wg    sync.WaitGroup
}

// Serve takes sessions from ln until it is closed.
func (d *SessionDoor) Serve(ln *rendezvous.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		d.mu.Lock()
		if d.conns == nil {
			d.conns = map[net.Conn]io.Closer{}
		}
		d.conns[c] = c
		d.wg.Add(1)
		d.mu.Unlock()
		go func() {
			defer d.wg.Done()
			d.serve(c)
			c.Close()
			d.mu.Lock()
			delete(d.conns, c)
			d.mu.Unlock()
		}()
	}
}

// CloseAll ends every session's connection: their sessions end, and
// each meets the next shared mcp-mux.
func (d *SessionDoor) CloseAll() {
	d.mu.Lock()
	conns := make([]io.Closer, 0, len(d.conns))
	for _, c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Wait waits for every session to end.
func (d *SessionDoor) Wait() { d.wg.Wait() }

func (d *SessionDoor) serve(c net.Conn) {
	c.SetDeadline(time.Now().Add(rendezvous.HelloTimeout))
	rd := bufio.NewReaderSize(c, 64<<10)
	h, err := rendezvous.ReadHello(rd)
	if err != nil {
		d.Logger.Warn("a session's hello was not read", "err", err)
		return
	}
	opts, serve, refused := d.Admit(h)
	if refused != "" {
		rendezvous.WriteWelcome(c, rendezvous.Welcome{PID: pid, Refused: refused})
		return
	}
	if err := rendezvous.WriteWelcome(c, rendezvous.Welcome{PID: pid}); err != nil {
		serve(nil)
		return
	}
	c.SetDeadline(time.Time{})
	var in io.Reader = bufferedConn{rd, c}
	var out io.Writer = c
	if rd.Buffered() == 0 { // the session waits for the welcome: nothing was read ahead
		if f := rendezvous.File(c); f != nil {
			defer f.Close()
			d.mu.Lock()
			d.conns[c] = f
			d.mu.Unlock()
			in, out = f, f
			// A session that ended its stdin still reads the answers;
			// one whose process is gone does not.
			opts.Gone = func() bool { return rendezvous.Hungup(f) }
		}
	}
	if err := serve(Stdio(in, out, opts)); err != nil {
		d.Logger.Debug("session ended", "err", err)
	}
}

var pid = os.Getpid()

// bufferedConn reads what the hello's reader already holds first.
type bufferedConn struct {
	rd *bufio.Reader
	net.Conn
}

func (b bufferedConn) Read(p []byte) (int, error) { return b.rd.Read(p) }
