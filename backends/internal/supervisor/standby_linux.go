package supervisor

import (
	"sync"
	"syscall"
)

// A supervisor takes about ten milliseconds from its exec to starting its
// backend: it is all of mcp-mux's executable, loaded and its Go runtime
// started. mcp-mux starts its first one, the standby, from this package's
// init, while the rest of mcp-mux is still being initialized, and hands it
// the first backend's command when it has one (TakeStandby): that
// backend then starts that much sooner. Until then the standby waits on its
// lifeline, a socket, and ends when the lifeline does.

// standby is the supervisor started at mcp-mux's start, until taken.
var standby struct {
	sync.Mutex
	pid, sock int // sock is 0 when there is none
}

// startStandby starts the standby at mcp-mux's start, unless args are a
// test binary's: tests of other packages start their supervisors the
// usual way, and tests of this one call StartStandby. (A supervisor never
// gets here.)
func startStandby(args []string) {
	for _, a := range args {
		if len(a) > 6 && a[:6] == "-test." {
			return
		}
	}
	StartStandby()
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
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return 0, false
	}
	// Its own process group, as for any supervisor: signals sent to
	// mcp-mux's (a terminal's ^C) are not for it.
	pid, err = syscall.ForkExec("/proc/self/exe", []string{Arg0, StandbyArg}, &syscall.ProcAttr{
		Env:   Env,
		Files: []uintptr{uintptr(null), uintptr(null), 2, uintptr(fds[1])},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	syscall.Close(null)
	syscall.Close(fds[1])
	if err != nil {
		syscall.Close(fds[0])
		return 0, false
	}
	standby.pid, standby.sock = pid, fds[0]
	return pid, true
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
// is its lifeline. The taker sends on it one byte carrying the backend's
// stdin, stdout and stderr (SCM_RIGHTS), then the Launch; the standby
// answers on it as a supervisor does on fd 4, in one line, and from then
// on reads it only for its end. ok is false if there is no standby.
func TakeStandby() (pid, sock int, ok bool) {
	standby.Lock()
	defer standby.Unlock()
	pid, sock = standby.pid, standby.sock
	standby.sock = 0
	return pid, sock, sock != 0
}

// adoptStdio waits on the lifeline of a standby for the byte that carries
// the backend's stdio, which becomes the supervisor's own fds 0, 1 and 2
// (for the backend to inherit, as from a supervisor started for it). ok is
// false if the lifeline ended first (msg is empty: mcp-mux is gone, or
// will start no backend) or the byte came without them (msg says so).
func adoptStdio() (msg string, ok bool) {
	var b [1]byte
	oob := make([]byte, syscall.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := syscall.Recvmsg(3, b[:], oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return "", false
		}
		var fds []int
		if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
			fds, _ = syscall.ParseUnixRights(&msgs[0])
		}
		if len(fds) != 3 {
			for _, fd := range fds {
				syscall.Close(fd)
			}
			return "the standby supervisor got no stdio for the backend", false
		}
		for i, fd := range fds {
			syscall.Dup3(fd, i, 0)
			syscall.Close(fd)
		}
		return "", true
	}
}
