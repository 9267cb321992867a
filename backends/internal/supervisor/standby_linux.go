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

// StandbyEnv set to 1 has mcp-mux start its standby from this package's
// init, as soon as it runs: the long-lived shared process has it from the
// session that starts it, which knows the process will serve.
const StandbyEnv = "MCP_MUX_STANDBY"

// earlyStandby says whether mcp-mux's process, whose argv is args, starts
// its standby now, before main knows whether it serves (which then finds
// it started): only when its environment already says so. That is
// StandbyEnv, or MCP_MUX_SHARED=0, which makes a stdio launch serve
// in-process. Most launches are sessions that relay to the shared process
// and start none; a test binary starts none of itself.
func earlyStandby(args []string) bool {
	for _, a := range args {
		if len(a) > 6 && a[:6] == "-test." {
			return false
		}
	}
	if v, _ := syscall.Getenv(StandbyEnv); v == "1" {
		return true
	}
	v, _ := syscall.Getenv("MCP_MUX_SHARED")
	return v == "0" || equalFold(v, "false") || equalFold(v, "no")
}

// equalFold is ASCII strings.EqualFold: package strings initializes later.
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		if a[i]|0x20 != b[i]|0x20 {
			return false
		}
	}
	return true
}
