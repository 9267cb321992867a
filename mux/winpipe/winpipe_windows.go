//go:build windows

package winpipe

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// pipeListener serves a named pipe: one instance always waits for the
// next client, and each one that connects is handed out.
type pipeListener struct {
	name string
	sa   *windows.SecurityAttributes
	stop windows.Handle // an event, set by Close

	// acceptMu makes Accepts take turns: one waits on the instance, with
	// ov and connected, which live here, on the heap, as long as the
	// system may write to ov. Close takes it to know no Accept waits.
	acceptMu  sync.Mutex
	ov        windows.Overlapped
	connected windows.Handle // ov's event

	mu     sync.Mutex
	next   windows.Handle // the instance clients connect to, 0 while Accept waits on it
	closed bool
}

// pipeBuffer is each instance's buffer quota: a write past it waits for
// the reader.
const pipeBuffer = 64 << 10

// Listen creates the pipe name, whose first instance it must be (a pipe
// of that name someone else made first is refused), with the security
// descriptor sddl. Its instances are in message mode: a client's
// CloseWrite (winio's, a message of no bytes) is the end of what the
// server reads, and the client still reads the answers. A connection
// has deadlines, and Fd for its handle.
func Listen(name, sddl string) (net.Listener, error) {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return nil, fmt.Errorf("the pipe's security descriptor: %w", err)
	}
	l := &pipeListener{name: name, sa: &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}}
	if l.stop, err = windows.CreateEvent(nil, 1, 0, nil); err != nil {
		return nil, err
	}
	if l.connected, err = windows.CreateEvent(nil, 1, 0, nil); err != nil {
		windows.CloseHandle(l.stop)
		return nil, err
	}
	if l.next, err = l.instance(true); err != nil {
		windows.CloseHandle(l.stop)
		windows.CloseHandle(l.connected)
		return nil, err
	}
	return l, nil
}

// instance makes an instance of the pipe.
func (l *pipeListener) instance(first bool) (windows.Handle, error) {
	name, err := windows.UTF16PtrFromString(l.name)
	if err != nil {
		return 0, err
	}
	flags := uint32(windows.PIPE_ACCESS_DUPLEX | windows.FILE_FLAG_OVERLAPPED)
	if first {
		flags |= windows.FILE_FLAG_FIRST_PIPE_INSTANCE
	}
	mode := uint32(windows.PIPE_TYPE_MESSAGE | windows.PIPE_READMODE_BYTE | windows.PIPE_WAIT | windows.PIPE_REJECT_REMOTE_CLIENTS)
	return windows.CreateNamedPipe(name, flags, mode, windows.PIPE_UNLIMITED_INSTANCES, pipeBuffer, pipeBuffer, 0, l.sa)
}

// Accept waits for a client on the waiting instance, and makes the next
// one before handing it out, so a client always finds one.
func (l *pipeListener) Accept() (net.Conn, error) {
	l.acceptMu.Lock()
	defer l.acceptMu.Unlock()
	l.mu.Lock()
	h := l.next
	if l.closed || h == 0 {
		l.mu.Unlock()
		return nil, net.ErrClosed
	}
	l.next = 0
	l.mu.Unlock()
	if err := l.connect(h); err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		windows.CloseHandle(h)
		return nil, net.ErrClosed
	}
	next, err := l.instance(false)
	if err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	l.next = next
	f, err := winio.NewOpenFile(h) // deadlines, and reads that end
	if err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	return &pipeConn{f: f.(pipeFile), name: l.name}, nil
}

// connect waits until a client connects to h, or Close. Called with
// acceptMu held.
func (l *pipeListener) connect(h windows.Handle) error {
	for {
		windows.ResetEvent(l.connected)
		l.ov = windows.Overlapped{HEvent: l.connected}
		err := windows.ConnectNamedPipe(h, &l.ov)
		var n uint32
		if errors.Is(err, windows.ERROR_IO_PENDING) {
			which, werr := windows.WaitForMultipleObjects([]windows.Handle{l.connected, l.stop}, false, windows.INFINITE)
			if werr != nil || which != windows.WAIT_OBJECT_0 {
				windows.CancelIoEx(h, &l.ov)
				windows.GetOverlappedResult(h, &l.ov, &n, true) // the system is done with ov
				if werr != nil {
					return werr
				}
				return net.ErrClosed
			}
			err = windows.GetOverlappedResult(h, &l.ov, &n, false)
		}
		switch {
		case err == nil, errors.Is(err, windows.ERROR_PIPE_CONNECTED):
			return nil
		case errors.Is(err, windows.ERROR_NO_DATA):
			// A client that came and went before it was accepted.
			windows.DisconnectNamedPipe(h)
			continue
		}
		return err
	}
}

// Close closes the waiting instance and ends an Accept waiting on it;
// the connections handed out stay open.
func (l *pipeListener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	if l.next != 0 {
		windows.CloseHandle(l.next)
		l.next = 0
	}
	l.mu.Unlock()
	windows.SetEvent(l.stop)
	l.acceptMu.Lock() // the Accept that waited has seen stop
	windows.CloseHandle(l.stop)
	windows.CloseHandle(l.connected)
	l.acceptMu.Unlock()
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(l.name) }

type pipeAddr string

func (pipeAddr) Network() string  { return "pipe" }
func (a pipeAddr) String() string { return string(a) }

// pipeFile is what winio's NewOpenFile returns.
type pipeFile interface {
	io.ReadWriteCloser
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
	Fd() uintptr
}

// pipeConn is the server's end of a connection.
type pipeConn struct {
	f    pipeFile
	name string
	eof  atomic.Bool // the client's message of no bytes: its writing side closed
}

func (c *pipeConn) Read(b []byte) (int, error) {
	if c.eof.Load() {
		return 0, io.EOF
	}
	n, err := c.f.Read(b)
	if err == io.EOF {
		c.eof.Store(true)
	}
	return n, err
}

// Write never sends a message of no bytes, which the client would read
// as the end.
func (c *pipeConn) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return c.f.Write(b)
}

func (c *pipeConn) Close() error                       { return c.f.Close() }
func (c *pipeConn) Fd() uintptr                        { return c.f.Fd() }
func (c *pipeConn) LocalAddr() net.Addr                { return pipeAddr(c.name) }
func (c *pipeConn) RemoteAddr() net.Addr               { return pipeAddr(c.name) }
func (c *pipeConn) SetReadDeadline(t time.Time) error  { return c.f.SetReadDeadline(t) }
func (c *pipeConn) SetWriteDeadline(t time.Time) error { return c.f.SetWriteDeadline(t) }
func (c *pipeConn) SetDeadline(t time.Time) error {
	c.f.SetReadDeadline(t)
	return c.f.SetWriteDeadline(t)
}
