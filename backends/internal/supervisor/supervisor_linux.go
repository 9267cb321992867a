package supervisor

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/mcp-mux/mcp-mux/backends/internal/launch"
)

// The supervisor sits between mcp-mux and one backend. It is a subreaper,
// so every process below it stays below it even when its parent dies (a
// double fork, a setsid daemon); mcp-mux alone holds the write end of its
// lifeline. When the backend exits, or the lifeline reads EOF (mcp-mux
// closed it, or died: the kernel closes a dead process's files, SIGKILL
// included), it kills everything below it, then exits the way the backend
// did, so that mcp-mux reports "exit status 3" or "killed by signal ...".
// It copies nothing: the backend has mcp-mux's pipes as its stdio.

func init() {
	if pid, parent, ok := launch.Started(); ok {
		supervise(pid, parent)
	}
}

// ParentDeathSignal is what the kernel sends the supervisor when the thread
// that started it exits: a signal of its own, on which the supervisor checks
// whether mcp-mux is really gone (Go issue 27505: the thread, not the
// process). Go's runtime ignores it until the supervisor listens for it.
const ParentDeathSignal = syscall.SIGUSR2

// prSetDumpable is a prctl option missing from package syscall.
const prSetDumpable = 4

// leftoverTerm is how long what is left of a backend's tree after the
// backend exited gets between SIGTERM and SIGKILL: what mcp-mux's Stop gives
// a backend's group.
const leftoverTerm = 300 * time.Millisecond

type supervisor struct {
	pid    int // the backend
	status syscall.WaitStatus
	reaped bool // status is the backend's
	sigs   chan os.Signal
	gone   chan struct{} // closed when the lifeline read EOF
}

// supervise runs the supervisor of the backend package launch started
// (whose pid is pid) for mcp-mux (parent); it does not return.
func supervise(pid, parent int) {
	// A parent-death signal (the backend's) fires when the thread that
	// forked it exits, not the process: package launch forked it from the
	// main thread, on which this init runs too; stay on it for good.
	runtime.LockOSThread()
	// Non-blocking, the lifeline is watched by the runtime's poller rather
	// than a thread blocked in read(2).
	syscall.SetNonblock(3, true)
	lifeline := os.NewFile(3, "lifeline")

	s := &supervisor{pid: pid, sigs: make(chan os.Signal, 16), gone: make(chan struct{})}
	// SIGCHLD to reap; the rest, sent by hand, go to the backend's group.
	signal.Notify(s.sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, ParentDeathSignal)
	// The backend may have exited before SIGCHLD was caught.
	s.reap()
	// Our copies of the backend's stdin and stdout must not keep its pipes
	// open; stderr stays for our few words, which mcp-mux logs as its.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		syscall.Dup3(int(null.Fd()), 0, 0)
		syscall.Dup3(int(null.Fd()), 1, 0)
		null.Close()
	}

	go func() {
		io.Copy(io.Discard, lifeline)
		close(s.gone)
	}()
	// In case a SIGCHLD is lost to a full channel.
	tick := time.NewTicker(2 * time.Second)
	for !s.reaped {
		select {
		case <-tick.C:
			s.reap()
		case <-s.gone:
			s.endTree(0)
			s.exit()
		case sig := <-s.sigs:
			switch sig {
			case syscall.SIGCHLD:
				s.reap()
			case ParentDeathSignal:
				// Also sent when only the thread that started us ended.
				if os.Getppid() != parent {
					s.endTree(0)
					s.exit()
				}
			default: // sent to us by hand: the backend's to act on
				syscall.Kill(-s.pid, sig.(syscall.Signal))
			}
		}
	}
	s.endTree(leftoverTerm)
	s.exit()
}

// reap collects every child that has exited, keeping the backend's status,
// and reports whether any child (live or not yet collected) is left.
func (s *supervisor) reap() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil: // ECHILD
			return false
		case pid == 0:
			return true
		case pid == s.pid:
			s.status, s.reaped = ws, true
		}
	}
}

// endTree ends every process below the supervisor: SIGTERM first for
// grace (unless mcp-mux is gone or wants it all dead: the lifeline), then
// SIGKILL, until it has no child left. As a subreaper it adopts whatever is
// orphaned meanwhile, so no child left means nothing below.
func (s *supervisor) endTree(grace time.Duration) {
	self := os.Getpid()
	killFrom := time.Now().Add(grace)
	giveUp := killFrom.Add(5 * time.Second)
	termed := map[int]bool{}
	for s.reap() {
		now := time.Now()
		select {
		case <-s.gone:
			killFrom = now
		default:
		}
		if now.After(giveUp) {
			// Only a process stuck in the kernel (state D) outlives SIGKILL.
			fmt.Fprintf(os.Stderr, "mcp-mux supervisor: giving up on processes SIGKILL does not end: %v\n", descendants(self))
			return
		}
		for _, pid := range descendants(self) {
			if now.Before(killFrom) {
				if !termed[pid] {
					termed[pid] = true
					syscall.Kill(pid, syscall.SIGTERM)
				}
				continue
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-s.sigs: // SIGCHLD, mostly; the rest means nothing now
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// exit ends the supervisor the way the backend ended.
func (s *supervisor) exit() {
	switch {
	case !s.reaped:
	case s.status.Exited():
		os.Exit(s.status.ExitStatus())
	case s.status.Signaled():
		reraise(s.status.Signal())
	}
	os.Exit(1)
}

// reraise kills the supervisor with sig. Go's runtime would turn some
// signals into a goroutine dump and exit 2 (SIGQUIT, SIGABRT) or ignore them
// (a SIGSEGV sent by kill), so its handler is replaced by the default at the
// kernel first.
func reraise(sig syscall.Signal) {
	// The backend left its core dump, if any; the supervisor's is noise.
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
	var act [8]uint64 // all zero: SIG_DFL, no flags, empty mask, in any layout
	syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	syscall.Kill(os.Getpid(), sig)
	time.Sleep(time.Second) // a signal that does not terminate (none should get here)
	os.Exit(128 + int(sig))
}

// descendants lists the live processes below root, from the parent links in
// /proc (which do not need CONFIG_PROC_CHILDREN).
func descendants(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		st := string(data)
		i := strings.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(st[i+1:])
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	for queue := children[root]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}
