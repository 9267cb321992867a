package supervisor

import (
	"syscall"
	"time"
	"unsafe"
)

// A backend becomes one through an exec of this executable (runExec), which
// makes itself a subreaper first; that exec loads all of mcp-mux's binary
// and starts a Go runtime, about 2 ms of the first backend's start, the one
// an agent waits for. So the supervisor forks and execs one such process as
// it starts, the spare, while mcp-mux is still loading its config; the
// first backend is then handed to it, and needs only its stdio, its
// directory and its exec. Only the first: later backends are forked as
// they come, and no idle process stays beside the running backends. A
// spare that nothing takes within spareIdle is let go.

// spareArg0 is the spare's argv[0] (see runSpare).
const spareArg0 = "mcp-mux-spare"

// spareIdle is how long a spare waits for the first backend.
const spareIdle = 10 * time.Second

// spare is the process forked ahead of the first backend, and this end of
// its socket (the launch and the backend's stdio go on it) and of its
// report pipe (as for a forked backend: see handOver).
type spare struct {
	pid, sock, report int
	idle              *time.Timer
}

// makeSpare forks and execs the spare; without one, the first backend is
// forked as the others are. Called from the main thread (see loop).
func (s *supervisor) makeSpare() {
	socks, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	var report [2]int
	if err := syscall.Pipe2(report[:], syscall.O_CLOEXEC); err != nil {
		syscall.Close(socks[0])
		syscall.Close(socks[1])
		return
	}
	null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err == nil {
		// As a backend is forked (start), but in no directory yet.
		var pid int
		pid, err = syscall.ForkExec("/proc/self/exe", []string{spareArg0}, &syscall.ProcAttr{
			Env:   Env,
			Files: []uintptr{uintptr(null), uintptr(null), uintptr(null), uintptr(socks[1]), uintptr(report[1])},
			Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
		})
		syscall.Close(null)
		if err == nil {
			s.spare = &spare{pid: pid, sock: socks[0], report: report[0], idle: time.NewTimer(spareIdle)}
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	}
	syscall.Close(socks[1])
	syscall.Close(report[1])
	if err != nil {
		syscall.Close(socks[0])
		syscall.Close(report[0])
	}
}

// takeSpare hands the spare over, once; nil if there is none.
func (s *supervisor) takeSpare() *spare {
	sp := s.spare
	if sp != nil {
		s.spare = nil
		sp.idle.Stop()
	}
	return sp
}

// retireSpare lets the spare go: it reads the end of its socket and exits.
func (s *supervisor) retireSpare() {
	if sp := s.takeSpare(); sp != nil {
		syscall.Close(sp.sock)
		syscall.Close(sp.report)
	}
}

// spareIdleC is when the spare is to be let go; nil if there is none.
func (s *supervisor) spareIdleC() <-chan time.Time {
	if s.spare == nil {
		return nil
	}
	return s.spare.idle.C
}

// startOnSpare hands the spare launch and stdio: ok false if it is gone
// (the caller forks instead). The rest of launch, if the socket did not
// take it all, and the spare's report are handOver's.
func startOnSpare(sp *spare, launch []byte, stdio []int) (rest []byte, ok bool) {
	for {
		n, err := syscall.SendmsgN(sp.sock, launch, syscall.UnixRights(stdio...), nil, syscall.MSG_NOSIGNAL)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			syscall.Close(sp.sock)
			syscall.Close(sp.report)
			return nil, false
		}
		return launch[n:], true
	}
}

// runSpare is the spare: it waits on its socket (fd 3) for the launch of
// the first backend and its stdio, and becomes that backend (becomeBackend,
// reporting on fd 4 as runExec does). The end of its socket without a
// launch is the supervisor letting it go. It does not return.
func runSpare() {
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	name := []byte("mcp-mux-spare\x00")
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetName, uintptr(unsafe.Pointer(&name[0])), 0)
	b, stdio := receive(3)
	if len(b) == 0 && len(stdio) == 0 {
		syscall.Exit(0)
	}
	l, msg := parseLaunch(b)
	if msg == "" && len(stdio) != 3 {
		msg = "reading the command from mcp-mux: no stdio came with it"
	}
	if msg == "" {
		for i, fd := range stdio { // each above 4: 0 to 4 are open
			if err := syscall.Dup3(fd, i, 0); err != nil {
				msg = "fork/exec " + l.Path + ": taking its stdio: " + err.Error()
				break
			}
			syscall.Close(fd)
		}
	}
	if msg == "" && l.Dir != "" {
		if err := syscall.Chdir(l.Dir); err != nil {
			msg = "fork/exec " + l.Path + ": " + inDir(l.Dir, err)
		}
	}
	if msg == "" {
		msg = becomeBackend(l)
	}
	syscall.Write(4, []byte(oneLine(msg)))
	syscall.Exit(127)
}

// receive reads fd to its end: the bytes, and the fds that came with them.
func receive(fd int) (b []byte, fds []int) {
	chunk := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	for len(b) <= maxLaunch+4 {
		n, oobn, _, _, err := syscall.Recvmsg(fd, chunk, oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if oobn > 0 {
			if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for i := range msgs {
					got, _ := syscall.ParseUnixRights(&msgs[i])
					fds = append(fds, got...)
				}
			}
		}
		if err != nil || n <= 0 {
			return b, fds
		}
		b = append(b, chunk[:n]...)
	}
	return b, fds
}
