package rendezvous

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

var (
	errHeld    = errors.New("lock held")
	errNotOurs = errors.New("not yours")
)

// ErrRunning is Listen's when another process holds the place.
var ErrRunning = errors.New("another mcp-mux serves this config already")

// Listener is the long-lived process's end of a place. It holds the
// place's run lock from Listen until Close.
type Listener struct {
	net.Listener
	p    Place
	run  *lock
	once sync.Once
}

// Listen takes p for this process: its run lock first (ErrRunning if
// another process has it), then its socket.
func Listen(p Place) (*Listener, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	run, err := tryLock(p.path(".run.lock"))
	if errors.Is(err, errHeld) {
		return nil, ErrRunning
	}
	if err != nil {
		return nil, fmt.Errorf("rendezvous lock: %w", err)
	}
	ln, err := p.listen()
	if err != nil {
		run.release()
		return nil, fmt.Errorf("rendezvous socket: %w", err)
	}
	return &Listener{Listener: ln, p: p, run: run}, nil
}

// Accept waits for the next session of this user's; connections of
// another user's are closed unanswered.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if why := peerOurs(c); why != "" {
			c.Close()
			continue
		}
		return c, nil
	}
}

// Close stops taking sessions and frees the place: the socket goes first,
// then the run lock, so a session that finds no socket and a free lock
// knows it may start the next process.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		err = l.Listener.Close()
		l.p.unlink()
		l.run.release()
	})
	return err
}

// spawnWait bounds how long a session waits for a place to answer: the
// spawn lock another session holds, a process it started, or one that is
// ending.
const spawnWait = 10 * time.Second

// Meet connects to the long-lived process of p, starting one with spawn
// when none runs. Sessions that meet at once take turns under p's spawn
// lock, so only one of them starts a process and the others meet it.
// spawn's channel, if not nil, is closed when the process it started
// ends: one that ends before it answers is not waited for.
func Meet(p Place, spawn func() (ended <-chan struct{}, err error)) (net.Conn, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	if c, err := p.dial(); err == nil {
		return c, nil
	} else if errors.Is(err, errNotOurs) {
		return nil, err
	}
	deadline := time.Now().Add(spawnWait)
	var sl *lock
	for {
		var err error
		sl, err = tryLock(p.path(".spawn.lock"))
		if err == nil {
			break
		}
		if !errors.Is(err, errHeld) {
			return nil, fmt.Errorf("rendezvous lock: %w", err)
		}
		// Another session is starting the process: meet it.
		if c, err := p.dial(); err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("another session held the rendezvous for too long")
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer sl.release()
	spawned := false
	var ended <-chan struct{}
	for {
		c, err := p.dial()
		if err == nil {
			return c, nil
		}
		if errors.Is(err, errNotOurs) {
			return nil, err
		}
		if !spawned {
			// Only a free run lock proves that no process serves (or is
			// still ending) at p.
			if run, err := tryLock(p.path(".run.lock")); err == nil {
				run.release()
				if ended, err = spawn(); err != nil {
					return nil, fmt.Errorf("starting the shared mcp-mux: %w", err)
				}
				spawned = true
			}
		} else if isClosed(ended) {
			// It ended without answering. If it lost the run lock to
			// another, that one answers; else none will.
			if run, err := tryLock(p.path(".run.lock")); err == nil {
				run.release()
				return nil, errors.New("the shared mcp-mux it started ended at once (its log says why)")
			}
		}
		if time.Now().After(deadline) {
			if spawned {
				return nil, errors.New("the shared mcp-mux started but did not answer in time")
			}
			return nil, errors.New("the shared mcp-mux was ending for too long")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isClosed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}
