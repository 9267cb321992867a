package backends

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-mux/mcp-mux/backends/internal/supervisor"
)

// selfExe runs mcp-mux's own binary: /proc/self/exe rather than
// os.Executable, as it still works when the binary was replaced or deleted on
// disk since mcp-mux started. A variable for tests.
var selfExe = "/proc/self/exe"

// current is this process's supervisor, once started.
var current struct {
	sync.Mutex
	conn *supervisorConn
}

// theSupervisor is this process's supervisor: the one that runs, else the
// standby (StartStandby), else a new one.
func theSupervisor() (*supervisorConn, error) {
	current.Lock()
	defer current.Unlock()
	if c := current.conn; c != nil && !c.isGone() {
		return c, nil
	}
	pid, sock, ok := supervisor.TakeStandby()
	if !ok {
		var err error
		if pid, sock, err = supervisor.Start(selfExe); err != nil {
			return nil, err
		}
	}
	current.conn = newSupervisorConn(pid, sock)
	return current.conn, nil
}

// supervisorConn is mcp-mux's end of its supervisor's lifeline: the one
// socket that starts, cuts and leaves backends, and learns how they
// ended. Its end, however mcp-mux ends, is the supervisor's signal to end
// them all.
type supervisorConn struct {
	pid  int
	sock *os.File // non-blocking, so that the poller gives it deadlines
	// wmu keeps each message whole: a Start may take several writes.
	// Every write has a deadline, so that a supervisor that stopped
	// reading holds no writer for long.
	wmu sync.Mutex

	mu      sync.Mutex
	next    uint32
	waiting map[uint32]*supervised
	gone    bool
	done    chan struct{} // closed once gone
}

// supervised is one backend under the supervisor, until its Exit.
type supervised struct {
	started  chan startResult // its Pid or Error, once
	answered bool             // started has its one value; under mu
	exited   chan struct{}
	err      error // how it ended; read after exited is closed
}

type startResult struct {
	pid int
	err error
}

// errSupervisorGone is a supervisor that ended before it answered (the
// standby was killed before it was needed): a new one is started.
var errSupervisorGone = errors.New("the supervisor is gone")

func newSupervisorConn(pid, sock int) *supervisorConn {
	syscall.SetNonblock(sock, true)
	c := &supervisorConn{pid: pid, sock: os.NewFile(uintptr(sock), "supervisor lifeline"), waiting: map[uint32]*supervised{}, done: make(chan struct{})}
	// It reads until the supervisor ends, which it does only once mcp-mux
	// is gone, or killed.
	go c.read()
	return c
}

func (c *supervisorConn) isGone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}

// start has the supervisor start cmd's program with stdio as its stdin,
// stdout and stderr.
func (c *supervisorConn) start(cmd *exec.Cmd, stdio []int) (*proc, error) {
	for attempt := 0; ; attempt++ {
		p, err := c.startOnce(cmd, stdio)
		if !errors.Is(err, errSupervisorGone) || attempt > 0 {
			return p, err
		}
		// The standby died before it was needed: a new supervisor.
		if c, err = theSupervisor(); err != nil {
			return nil, fmt.Errorf("starting its supervisor: %w", err)
		}
	}
}

func (c *supervisorConn) startOnce(cmd *exec.Cmd, stdio []int) (*proc, error) {
	c.mu.Lock()
	if c.gone {
		c.mu.Unlock()
		return nil, errSupervisorGone
	}
	c.next++
	id := c.next
	s := &supervised{started: make(chan startResult, 1), exited: make(chan struct{})}
	c.waiting[id] = s
	c.mu.Unlock()

	msg := supervisor.EncodeStart(id, supervisor.Launch{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir})
	if err := c.send(msg, syscall.UnixRights(stdio...), launchTimeout); err != nil {
		c.forget(id)
		select { // a write that failed for a supervisor gone: read sees its end
		case <-c.done:
			return nil, errSupervisorGone
		case <-time.After(time.Second):
		}
		return nil, fmt.Errorf("its supervisor did not take the command: %w", err)
	}
	select {
	case r := <-s.started:
		if r.err != nil {
			return nil, r.err
		}
		return &proc{pid: r.pid, wait: func() error { <-s.exited; return s.err }, sup: c, id: id}, nil
	case <-time.After(launchTimeout):
		c.forget(id)
		c.cut(id)
		return nil, fmt.Errorf("not started within %s", launchTimeout)
	}
}

func (c *supervisorConn) forget(id uint32) {
	c.mu.Lock()
	delete(c.waiting, id)
	c.mu.Unlock()
}

// cut ends backend id's lifeline: its tree ends at once, or after its
// grace if it was left (leave).
func (c *supervisorConn) cut(id uint32) {
	// A few bytes: they fit at once, unless the supervisor is gone.
	c.send(supervisor.EncodeCut(id), nil, 100*time.Millisecond)
}

// leave tells the supervisor that mcp-mux exits and leaves backend id to
// it, with grace; false if it did not take the order.
func (c *supervisorConn) leave(id uint32, grace time.Duration) bool {
	return c.send(supervisor.EncodeLeave(id, grace), nil, 100*time.Millisecond) == nil
}

// send writes msg whole, with rights (fds) on its first byte, within d.
func (c *supervisorConn) send(msg, rights []byte, d time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.sock.SetWriteDeadline(time.Now().Add(d))
	if len(rights) > 0 {
		rc, err := c.sock.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := rc.Write(func(fd uintptr) bool {
			serr = syscall.Sendmsg(int(fd), msg[:1], rights, nil, syscall.MSG_NOSIGNAL)
			return serr != syscall.EAGAIN
		}); err != nil {
			return err
		}
		if serr != nil {
			return serr
		}
		msg = msg[1:]
	}
	_, err := c.sock.Write(msg)
	return err
}

// read takes the supervisor's replies to whom they are for, until it ends.
func (c *supervisorConn) read() {
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		n, err := c.sock.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for err == nil {
			r, used, ok := supervisor.ParseReply(buf)
			if !ok {
				err = errors.New("a malformed reply")
			}
			if used == 0 {
				break
			}
			buf = buf[used:]
			c.deliver(r)
		}
		if err != nil {
			break
		}
	}
	c.ended()
}

func (c *supervisorConn) deliver(r supervisor.Reply) {
	c.mu.Lock()
	s := c.waiting[r.ID]
	if s != nil && (r.Failed() || r.Exited()) {
		delete(c.waiting, r.ID)
	}
	if s != nil && !r.Exited() {
		s.answered = true
	}
	c.mu.Unlock()
	switch {
	case s == nil:
	case r.Started():
		s.started <- startResult{pid: r.Pid}
	case r.Failed():
		s.started <- startResult{err: errors.New(r.Err)}
	case r.Exited():
		s.err = statusError(syscall.WaitStatus(r.Status))
		close(s.exited)
	}
}

// ended: the supervisor is gone (killed: it ends by itself only once
// mcp-mux is), and the backends with it, by their parent-death signal.
func (c *supervisorConn) ended() {
	c.sock.Close()
	how := "gone"
	if p, err := os.FindProcess(c.pid); err == nil { // a child: waitable, by pidfd
		st, err := p.Wait()
		if err == nil && !st.Success() {
			err = &exec.ExitError{ProcessState: st}
		}
		how = exitReason(err)
	}
	gone := fmt.Errorf("its supervisor (pid %d) ended (%s), and the backend with it", c.pid, how)
	c.mu.Lock()
	c.gone = true
	close(c.done)
	waiting := c.waiting
	c.waiting = nil
	for _, s := range waiting {
		if !s.answered {
			s.answered = true
			s.started <- startResult{err: fmt.Errorf("%w: %v", errSupervisorGone, gone)}
		}
	}
	c.mu.Unlock()
	for _, s := range waiting {
		s.err = gone
		close(s.exited)
	}
}

// statusError is how a backend ended as the error cmd.Wait would give:
// none for exit status 0.
func statusError(ws syscall.WaitStatus) error {
	switch {
	case ws.Signaled():
		return &exitStatus{signal: ws.Signal().String()}
	case ws.ExitStatus() != 0:
		return &exitStatus{code: ws.ExitStatus()}
	}
	return nil
}
