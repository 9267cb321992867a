package supervisor

import (
	"syscall"
	"time"
	"unsafe"
)

// The supervisor sits between mcp-mux and one backend. It is a subreaper,
// so every process below it stays below it even when its parent dies (a
// double fork, a setsid daemon); mcp-mux alone holds the write end of its
// lifeline (fd 3). When the backend exits, or the lifeline reads EOF
// (mcp-mux closed it, or died: the kernel closes a dead process's files,
// SIGKILL included), it kills everything below it, then exits the way the
// backend did, so that mcp-mux reports "exit status 3" or "killed by
// signal ...". It copies nothing: the backend has mcp-mux's pipes as its
// stdio. When mcp-mux exits it leaves the backend to the supervisor (see
// EncodeLeave), which then stops it as mcp-mux would have, mcp-mux gone.
//
// All of it runs inside this package's init, which never returns: the
// packages that would be initialized after it (the rest of mcp-mux) never
// are. So it uses no package that is initialized late: os, os/signal and
// fmt are not available, and signals are not caught (see run).

// prctl options missing from package syscall.
const (
	prSetDumpable       = 4
	prSetName           = 15
	prSetChildSubreaper = 36
)

// maxLaunch bounds the command mcp-mux sends: a command line and an
// environment.
const maxLaunch = 16 << 20

// leftoverTerm is how long what is left of a backend's tree after the
// backend exited gets between SIGTERM and SIGKILL: what mcp-mux's Stop gives
// a backend's group.
const leftoverTerm = 300 * time.Millisecond

func init() {
	args := cmdline()
	if len(args) > 0 && args[0] == Arg0 {
		run(len(args) > 1 && args[1] == StandbyArg)
	}
	startStandby(args)
}

// cmdline is the process's argv, read from /proc: package os, which has
// os.Args, is initialized later. nil if it cannot be read.
func cmdline() []string {
	fd, err := syscall.Open("/proc/self/cmdline", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var all []byte
	buf := make([]byte, 4096)
	for len(all) < maxLaunch {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		all = append(all, buf[:n]...)
	}
	var args []string
	for len(all) > 0 {
		i := 0
		for i < len(all) && all[i] != 0 {
			i++
		}
		args = append(args, string(all[:i]))
		if i == len(all) {
			break
		}
		all = all[i+1:]
	}
	return args
}

// run starts the backend and supervises it; it does not return. A
// standby has the lifeline only, a socket, and reports on it.
func run(standby bool) {
	// fds 3 (the lifeline) and 4 (the report) are the supervisor's alone.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	// The lifeline is read in blocking reads, where EAGAIN would read as
	// mcp-mux gone (os/exec hands it over blocking; this makes sure).
	syscall.SetNonblock(3, false)
	// After an exec of /proc/self/exe the kernel's name for it is "exe".
	name := []byte("mcp-mux-superv\x00")
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetName, uintptr(unsafe.Pointer(&name[0])), 0)
	// A subreaper before the backend exists: whatever leaves its tree,
	// however early, stays below the supervisor.
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		say("not a subreaper (" + e.Error() + "): a process that leaves the backend's tree can outlive it")
	}
	report := 4
	if standby {
		report = 3
		if msg, ok := adoptStdio(); !ok {
			if msg == "" { // mcp-mux ended, or needs no backend started
				syscall.Exit(0)
			}
			syscall.Write(report, []byte("error "+msg+"\n"))
			syscall.Exit(127)
		}
	}
	pid, msg := start()
	if msg != "" {
		syscall.Write(report, []byte("error "+oneLine(msg)+"\n"))
		syscall.Exit(127)
	}
	syscall.Write(report, []byte("pid "+itoa(pid)+"\n"))
	if report == 4 {
		syscall.Close(4)
	}
	// Read ends of the backend's stdout and stderr, before our fds 0 and 1
	// become /dev/null: once mcp-mux has left the backend to us and is
	// gone, nobody else reads them, and a backend that writes as it ends
	// would die of SIGPIPE (or fail with EPIPE) within its grace.
	outputs := readEnds(1, 2)
	// Our copies of the backend's stdin and stdout must not keep its pipes
	// open; stderr stays for our few words, which mcp-mux logs as its.
	if null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0); err == nil {
		syscall.Dup3(null, 0, 0)
		syscall.Dup3(null, 1, 0)
		syscall.Close(null)
	}
	// Go's runtime would end the supervisor on these, leaving what the
	// backend started behind; mcp-mux signals the backend's group, never
	// the supervisor, so one sent to it by hand is ignored. (The backend
	// was started before: it has the default dispositions.)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		setDisposition(sig, sigIgn)
	}

	s := &supervisor{pid: pid, reaped: make(chan reaped, 16), gone: make(chan struct{}), leaving: make(chan struct{})}
	go s.reap()
	go s.readLifeline()
	gone := s.gone
	var graceOver, drainTick <-chan time.Time
	for {
		select {
		case r := <-s.reaped:
			if r.pid == s.pid {
				s.status, s.exited = r.status, true
				s.endTree(leftoverTerm)
				s.exit()
			}
		case <-gone:
			if !s.left() {
				s.endTree(0)
				s.exit()
			}
			// mcp-mux exited, and left the backend to us: its stdin is
			// closed, and nobody but us reads what it writes. Read here,
			// now and then, rather than by a goroutine per pipe: a read
			// that blocks takes a thread, and many backends end at once.
			gone = nil
			drain(outputs)
			drainTick = time.NewTicker(drainEvery).C
			graceOver = time.After(s.grace)
		case <-drainTick:
			drain(outputs)
		case <-graceOver:
			s.endTree(leftoverTerm)
			s.exit()
		}
	}
}

// readLifeline reads the lifeline for mcp-mux's order to leave the backend
// to the supervisor (setting grace, then closing leaving), until EOF or an
// error: mcp-mux closed it, or is gone (closing gone).
func (s *supervisor) readLifeline() {
	var buf [64]byte
	var order []byte
	for {
		n, err := syscall.Read(3, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			close(s.gone)
			return
		}
		if len(order) < leaveSize {
			order = append(order, buf[:min(n, leaveSize-len(order))]...)
			if grace, ok := decodeLeave(order); ok {
				s.grace = grace
				close(s.leaving)
			}
		}
	}
}

// left reports whether mcp-mux left the backend to the supervisor; once
// gone is closed, it has said all it will.
func (s *supervisor) left() bool {
	select {
	case <-s.leaving:
		return true
	default:
		return false
	}
}

// drainEvery is how often the supervisor reads what a left backend
// writes: a pipe's buffer (64 KiB) fits in between, past which the
// backend waits.
const drainEvery = 20 * time.Millisecond

// readEnds opens a non-blocking read end of each of fds that is a pipe,
// by its name in /proc (close-on-exec: the backend does not get them).
func readEnds(fds ...int) []int {
	var out []int
	for _, fd := range fds {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
			continue
		}
		// Non-blocking also as opening a FIFO to read may wait for a
		// writer.
		r, err := syscall.Open("/proc/self/fd/"+itoa(fd), syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		out = append(out, r)
	}
	return out
}

// drain reads and drops what is there to read on fds.
func drain(fds []int) {
	var buf [16 << 10]byte
	for _, fd := range fds {
		for {
			n, err := syscall.Read(fd, buf[:])
			if err != syscall.EINTR && n <= 0 {
				break
			}
		}
	}
}

// start reads the Launch from the lifeline and starts the backend: in its
// own process group (which mcp-mux signals to stop it), killed if the
// thread that forks it dies. That thread is the main thread, on which
// every init runs, and which lives as long as the process.
func start() (int, string) {
	var size [4]byte
	if n, _ := readFull(3, size[:]); n < len(size) {
		return 0, "reading the command from mcp-mux: no command"
	}
	r := reader{b: size[:]}
	length, _ := r.uint32()
	if length > maxLaunch {
		return 0, "reading the command from mcp-mux: command too long"
	}
	msg := make([]byte, length)
	if n, _ := readFull(3, msg); n < len(msg) {
		return 0, "reading the command from mcp-mux: cut short"
	}
	l, ok := decode(msg)
	if !ok {
		return 0, "reading the command from mcp-mux: malformed"
	}
	pid, err := syscall.ForkExec(l.Path, l.Args, &syscall.ProcAttr{
		Dir:   l.Dir,
		Env:   l.Env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return 0, "fork/exec " + l.Path + ": " + err.Error()
	}
	return pid, ""
}

type supervisor struct {
	pid    int // the backend
	status syscall.WaitStatus
	exited bool // status is the backend's
	reaped chan reaped
	gone   chan struct{} // closed when the lifeline read EOF
	// leaving is closed when mcp-mux left the backend to the supervisor
	// for when it is gone (EncodeLeave), with the backend's grace; before
	// gone, if at all.
	leaving chan struct{}
	grace   time.Duration
	empty   bool // no child is left (reap said so)
}

// reaped is a child that exited, or none (pid 0): no child is left.
type reaped struct {
	pid    int
	status syscall.WaitStatus
}

// reap collects every child as it exits, and says when none is left. With
// no child there is no descendant either, so none can be adopted later:
// that is the end.
func (s *supervisor) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil: // ECHILD
			s.reaped <- reaped{}
			return
		}
		s.reaped <- reaped{pid: pid, status: ws}
	}
}

// endTree ends every process below the supervisor: SIGTERM first for
// grace (unless mcp-mux is gone or wants it all dead: the lifeline, when
// mcp-mux did not leave the backend to it), then SIGKILL, until it has no
// child left. As a subreaper it adopts whatever is orphaned meanwhile, so
// no child left means nothing below.
func (s *supervisor) endTree(grace time.Duration) {
	self := syscall.Getpid()
	killFrom := time.Now().Add(grace)
	giveUp := killFrom.Add(5 * time.Second)
	termed := map[int]bool{}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !s.empty {
		now := time.Now()
		select {
		case <-s.gone:
			if !s.left() {
				killFrom = now
			}
		default:
		}
		if now.After(giveUp) {
			// Only a process stuck in the kernel (state D) outlives SIGKILL.
			left := ""
			for _, pid := range descendants(self) {
				left += " " + itoa(pid)
			}
			say("giving up on processes SIGKILL does not end:" + left)
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
		case r := <-s.reaped:
			s.note(r)
		case <-tick.C:
		}
		// Take whatever else is ready before looking again.
		for drained := false; !drained; {
			select {
			case r := <-s.reaped:
				s.note(r)
			default:
				drained = true
			}
		}
	}
}

// note records what reap reported during endTree.
func (s *supervisor) note(r reaped) {
	switch {
	case r.pid == 0:
		s.empty = true
	case r.pid == s.pid:
		s.status, s.exited = r.status, true
	}
}

// exit ends the supervisor the way the backend ended.
func (s *supervisor) exit() {
	switch {
	case !s.exited:
	case s.status.Exited():
		syscall.Exit(s.status.ExitStatus())
	case s.status.Signaled():
		reraise(s.status.Signal())
	}
	syscall.Exit(1)
}

// sigIgn and sigDfl are the dispositions SIG_IGN and SIG_DFL.
const (
	sigDfl = 0
	sigIgn = 1
)

// setDisposition sets sig's disposition at the kernel, past Go's runtime
// (which does not look again).
func setDisposition(sig syscall.Signal, handler uint64) {
	var act [8]uint64 // handler, then no flags, no restorer, an empty mask, in any layout
	act[0] = handler
	syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
}

// reraise kills the supervisor with sig. Go's runtime would turn some
// signals into a goroutine dump and exit 2 (SIGQUIT, SIGABRT) or ignore them
// (a SIGSEGV sent by kill), so its handler is replaced by the default at the
// kernel first.
func reraise(sig syscall.Signal) {
	// The backend left its core dump, if any; the supervisor's is noise.
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
	setDisposition(sig, sigDfl)
	syscall.Kill(syscall.Getpid(), sig)
	time.Sleep(time.Second) // a signal that does not terminate (none should get here)
	syscall.Exit(128 + int(sig))
}

// descendants lists the live processes below root, from the parent links in
// /proc (which do not need CONFIG_PROC_CHILDREN).
func descendants(root int) []int {
	children := map[int][]int{}
	for _, pid := range procPids() {
		state, ppid, ok := procStat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue // gone meanwhile, or dead
		}
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	for queue := children[root]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// procPids lists the pids in /proc.
func procPids() []int {
	fd, err := syscall.Open("/proc", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var pids []int
	buf := make([]byte, 16<<10)
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return pids
		}
		_, _, names := syscall.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if pid, ok := atoi(name); ok {
				pids = append(pids, pid)
			}
		}
	}
}

// procStat reads a process's state and parent from /proc/PID/stat:
// "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
func procStat(pid int) (state byte, ppid int, ok bool) {
	fd, err := syscall.Open("/proc/"+itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	defer syscall.Close(fd)
	var buf [1024]byte
	n, _ := readFull(fd, buf[:])
	st := buf[:n]
	i := len(st) - 1
	for i >= 0 && st[i] != ')' {
		i--
	}
	// ") S 123 ..."
	if i < 0 || len(st) < i+5 || st[i+1] != ' ' || st[i+3] != ' ' {
		return 0, 0, false
	}
	rest := st[i+4:]
	j := 0
	for j < len(rest) && rest[j] != ' ' {
		j++
	}
	ppid, ok = atoi(string(rest[:j]))
	return st[i+2], ppid, ok
}

// readFull reads len(b) bytes from fd unless it ends first.
func readFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := syscall.Read(fd, b[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			return n, err
		}
		n += m
	}
	return n, nil
}

// say writes one line of the supervisor's own to stderr, which mcp-mux
// logs as the backend's.
func say(s string) { syscall.Write(2, []byte("mcp-mux supervisor: "+s+"\n")) }

// oneLine is s with its line breaks made spaces: the report is one line.
func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// atoi parses a non-negative decimal int.
func atoi(s string) (int, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
