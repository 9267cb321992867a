package supervisor

import (
	"sync"
	"syscall"
)

// A supervisor takes a few milliseconds from its exec to being ready: it is
// all of mcp-mux's executable, loaded and its Go runtime started. A process
// that will start backends starts it, the standby, as soon as it knows it
// will (StartStandby), while it loads its config and makes its Mux, and
// takes it when it starts its first backend (TakeStandby): that backend
// then starts that much sooner. Until then the standby waits on its
// lifeline, a socket, and ends when the lifeline does. Not every launch
// starts one: most relay to the shared process, and start no backend.

// standby is the supervisor started ahead of the first backend, until
// taken.
var standby struct {
	sync.Mutex
	pid, sock int // sock is 0 when there is none
}

// StartStandby starts a standby if there is none waiting, and returns its
// pid. Without /proc or a stderr there is none (ok false), and backends
// start as they would without it.
func StartStandby() (pid int, ok bool) {
	standby.Lock()
	defer standby.Unlock()
	if standby.sock != 0 {
		return standby.pid, true
	}
	pid, sock, err := Start("/proc/self/exe")
	if err != nil {
		return 0, false
	}
	standby.pid, standby.sock = pid, sock
	return pid, true
}

// Start starts a supervisor, exe (mcp-mux's executable), and returns its
// pid (a child of this process, for the caller to wait on) and this end of
// its lifeline, a socket: see EncodeStart for what goes on it.
func Start(exe string) (pid, sock int, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return 0, 0, err
	}
	// Its own process group: signals sent to mcp-mux's (a terminal's ^C)
	// are not for it. Not mcp-mux's stderr either: it outlives mcp-mux,
	// and an agent that reads that stderr to its end would wait for it.
	// What it has to say, it says on a backend's.
	pid, err = syscall.ForkExec(exe, []string{Arg0}, &syscall.ProcAttr{
		Env:   Env,
		Files: []uintptr{uintptr(null), uintptr(null), uintptr(null), uintptr(fds[1])},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	syscall.Close(null)
	syscall.Close(fds[1])
	if err != nil {
		syscall.Close(fds[0])
		return 0, 0, err
	}
	return pid, fds[0], nil
}

// DiscardStandby lets a standby that no backend will use go (mcp-mux
// starts none of its own), and reaps it.
func DiscardStandby() {
	pid, sock, ok := TakeStandby()
	if !ok {
		return
	}
	syscall.Close(sock) // its lifeline: it ends
	go func() {
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				return
			}
		}
	}()
}

// TakeStandby hands over the standby supervisor, once: its pid (a child of
// this process, for the taker to wait on) and its end of the socket that
// is its lifeline. ok is false if there is no standby.
func TakeStandby() (pid, sock int, ok bool) {
	standby.Lock()
	defer standby.Unlock()
	pid, sock = standby.pid, standby.sock
	standby.sock = 0
	return pid, sock, sock != 0
}
