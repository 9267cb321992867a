package supervisor

import (
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// The supervisor sits between mcp-mux and its backends, all of them. It is
// a subreaper, and so is each backend (runExec makes it one before it
// becomes the backend): what a backend starts stays below that backend even
// when its own parent dies (a double fork, a setsid daemon), and comes to
// the supervisor only when the backend itself is gone. So what is below the
// supervisor and no longer below a running backend is what the backends
// that exited left behind, never another backend's. mcp-mux alone holds the
// other end of its lifeline (fd 3). When a backend exits, or its lifeline
// is cut (Cut, or mcp-mux gone: the kernel closes a dead process's files,
// SIGKILL included), it kills everything below that backend, then tells
// mcp-mux how the backend ended ("exit status 3", "killed by signal ...").
// It copies nothing: each backend has mcp-mux's pipes as its stdio. When
// mcp-mux exits it leaves the backends to the supervisor (see EncodeLeave),
// which then stops each as mcp-mux would have, mcp-mux gone.
//
// All of it runs inside this package's init, which never returns: the
// packages that would be initialized after it (the rest of mcp-mux) never
// are. So it uses no package that is initialized late: os, os/signal and
// fmt are not available, and signals are not caught (see run).

// prctl options missing from package syscall.
const (
	prSetName           = 15
	prSetChildSubreaper = 36
)

// leftoverTerm is how long what is left of a backend's tree after the
// backend exited gets between SIGTERM and SIGKILL: what mcp-mux's Stop gives
// a backend's group.
const leftoverTerm = 300 * time.Millisecond

// giveUpAfter is how long past SIGKILL the supervisor waits for a tree to
// go: only a process stuck in the kernel (state D) outlives SIGKILL.
const giveUpAfter = 5 * time.Second

func init() {
	args := cmdline()
	if len(args) > 0 {
		switch args[0] {
		case Arg0:
			run()
		case execArg0:
			runExec()
		case spareArg0:
			runSpare()
		}
	}
	if earlyStandby(args) {
		StartStandby()
	}
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

// run supervises the backends mcp-mux starts on the lifeline, fd 3, until
// it ends and they are gone; it does not return.
func run() {
	// The lifeline is the supervisor's alone, and is read in blocking
	// reads, where EAGAIN would read as mcp-mux gone.
	syscall.CloseOnExec(3)
	syscall.SetNonblock(3, false)
	// After an exec of /proc/self/exe the kernel's name for it is "exe".
	name := []byte("mcp-mux-superv\x00")
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetName, uintptr(unsafe.Pointer(&name[0])), 0)
	// A subreaper before any backend exists: what a backend leaves
	// behind, however early, comes to the supervisor.
	var notSubreaper string
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		notSubreaper = "not a subreaper (" + e.Error() + "): a process that leaves a backend's tree can outlive it"
	}
	// Go's runtime would end the supervisor on these, leaving what the
	// backends started behind; mcp-mux signals a backend's group, never
	// the supervisor, so one sent to it by hand is ignored. (A backend
	// gets the defaults back: its fork resets what Go caught.)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		setDisposition(sig, sigIgn)
	}
	s := &supervisor{
		self:         syscall.Getpid(),
		notSubreaper: notSubreaper,
		children:     map[uint32]*child{},
		byPid:        map[int]*child{},
		requests:     make(chan request),
		launched:     make(chan launched),
		reaped:       make(chan reaped, 16),
		kick:         make(chan struct{}, 1),
	}
	go s.reap()
	go s.readLifeline()
	s.makeSpare()
	s.loop()
}

type supervisor struct {
	self int
	// notSubreaper says why the supervisor is no subreaper, if it is not:
	// each backend's log says it.
	notSubreaper string
	children     map[uint32]*child // by mcp-mux's id
	byPid        map[int]*child
	requests     chan request  // what mcp-mux sends; closed when the lifeline ends
	launched     chan launched // how a backend's exec went
	reaped       chan reaped
	kick         chan struct{} // a child was forked: reap has one to wait for
	spare        *spare        // the first backend's process, forked ahead
	gone         bool          // the lifeline ended: mcp-mux is gone
	// leftoverTermed is what is left of exited backends that got its
	// SIGTERM, since leftoverSince.
	leftoverTermed map[int]bool
	leftoverSince  time.Time
	wmu            sync.Mutex // one reply at a time on the lifeline
}

// child is one backend, from its start to its report of how it ended.
type child struct {
	id      uint32
	pid     int
	started bool // its pid was reported
	failed  bool // its start failed and was reported: no Exit follows
	exited  bool
	status  syscall.WaitStatus
	stderr  int   // the backend's stderr, for the supervisor's words about it
	outputs []int // read ends of its stdout and stderr (see readEnds)
	left    bool  // mcp-mux left it to the supervisor, with grace
	grace   time.Duration
	cut     bool // its lifeline ended
	// graceOver is when a left backend whose lifeline ended has had its
	// grace; zero until then.
	graceOver time.Time
	// ending is set once its tree is being ended: SIGTERM once, then
	// SIGKILL from killFrom; once it exited, killFrom is what its
	// leftovers get.
	ending   bool
	killFrom time.Time
	termed   map[int]bool
}

// reaped is a child that exited.
type reaped struct {
	pid    int
	status syscall.WaitStatus
}

// loop serves mcp-mux's requests and ends what must end, on the main
// goroutine: backends are forked from the main thread, which lives as long
// as the supervisor, so that their parent-death signal fires only when the
// supervisor dies.
func (s *supervisor) loop() {
	var tick *time.Ticker
	var tickC <-chan time.Time
	for {
		if busy := s.busy(); busy && tick == nil {
			tick = time.NewTicker(10 * time.Millisecond)
			tickC = tick.C
		} else if !busy && tick != nil {
			tick.Stop()
			tick, tickC = nil, nil
		}
		select {
		case r, ok := <-s.requests:
			if !ok {
				s.lifelineEnded()
				continue
			}
			s.handle(r)
		case l := <-s.launched:
			s.onLaunched(l)
		case r := <-s.reaped:
			s.onReaped(r)
		case <-tickC:
		case <-s.spareIdleC():
			s.retireSpare()
		}
		s.step(time.Now())
	}
}

// busy reports whether something is to be done over time: a tree to end,
// a grace running, output to drain, mcp-mux gone.
func (s *supervisor) busy() bool {
	if s.gone {
		return true
	}
	for _, c := range s.children {
		if c.ending || c.exited || !c.graceOver.IsZero() {
			return true
		}
	}
	return false
}

func (s *supervisor) handle(r request) {
	switch r.op {
	case opStart:
		s.start(r)
	case opLeave:
		if c := s.children[r.id]; c != nil {
			c.left, c.grace = true, r.grace
		}
	case opCut:
		if c := s.children[r.id]; c != nil {
			s.cut(c, time.Now())
		}
	}
}

// cut is the end of c's lifeline: its tree ends at once, unless mcp-mux
// left it c, which then has its grace first.
func (s *supervisor) cut(c *child, now time.Time) {
	if c.cut {
		return
	}
	c.cut = true
	if c.left && !c.exited {
		// Its stdin is closed, and nobody but the supervisor reads what it
		// writes now (see step).
		c.graceOver = now.Add(c.grace)
		drain(c.outputs)
		return
	}
	s.end(c, now, 0)
}

// end starts ending c's tree: SIGTERM, and SIGKILL grace later.
func (s *supervisor) end(c *child, now time.Time, grace time.Duration) {
	from := now.Add(grace)
	if !c.ending || from.Before(c.killFrom) {
		c.killFrom = from
	}
	if !c.ending {
		c.ending, c.termed = true, map[int]bool{}
	}
}

// lifelineEnded: mcp-mux is gone, and so is every backend's lifeline.
func (s *supervisor) lifelineEnded() {
	s.retireSpare()
	s.requests = nil
	s.gone = true
	now := time.Now()
	for _, c := range s.children {
		s.cut(c, now)
	}
}

// launched is how a backend's exec went: msg says why it failed, or is
// empty.
type launched struct {
	id  uint32
	msg string
}

func (s *supervisor) onLaunched(l launched) {
	c := s.children[l.id]
	if c == nil {
		return
	}
	if l.msg != "" {
		s.reply(encodeError(c.id, l.msg))
		c.failed = true
		if c.exited {
			s.drop(c)
		}
		return
	}
	c.started = true
	s.reply(encodeReply(opPid, c.id, uint32(c.pid)))
}

func (s *supervisor) onReaped(r reaped) {
	c := s.byPid[r.pid]
	if c == nil || c.exited {
		return // what was left of a backend, reaped
	}
	c.exited, c.status = true, r.status
	if c.failed {
		s.drop(c)
		return
	}
	now := time.Now()
	c.graceOver = time.Time{}
	// What it leaves: SIGTERM, and SIGKILL shortly after; at once if
	// mcp-mux wanted it all gone.
	grace := leftoverTerm
	if c.cut && !c.left {
		grace = 0
	}
	s.end(c, now, grace)
}

// step does what is due at now: a grace that is over starts the end of
// its backend's tree; trees being ended get their signals; a backend that
// exited, once what it left is gone, is reported; and when mcp-mux is gone
// and nothing is left, the supervisor exits.
func (s *supervisor) step(now time.Time) {
	work := s.gone
	for _, c := range s.children {
		if !c.graceOver.IsZero() {
			drain(c.outputs)
			if !now.Before(c.graceOver) {
				c.graceOver = time.Time{}
				s.end(c, now, leftoverTerm)
			}
		}
		work = work || c.ending
	}
	if !work {
		return
	}
	tree := procChildren()
	// What is directly below the supervisor is a backend that runs, or
	// what an exited one left. A leftover of one exited backend cannot
	// be told from another's: they get the earliest SIGKILL of the
	// backends that exited, and each of those is reported once no
	// leftover is left.
	if s.leftoverSince.IsZero() {
		s.leftoverSince = now
	}
	leftoverKill := s.leftoverSince.Add(leftoverTerm)
	for _, c := range s.children {
		if c.exited && c.killFrom.Before(leftoverKill) {
			leftoverKill = c.killFrom
		}
	}
	leftovers := false
	for _, pid := range tree[s.self] {
		c := s.byPid[pid]
		switch {
		case s.spare != nil && pid == s.spare.pid:
		case c != nil && !c.exited:
			if c.ending {
				signalAll(below(tree, pid), now, c.killFrom, c.termed)
			}
		default:
			leftovers = true
			if s.leftoverTermed == nil {
				s.leftoverTermed = map[int]bool{}
			}
			signalAll(below(tree, pid), now, leftoverKill, s.leftoverTermed)
		}
	}
	if !leftovers {
		s.leftoverTermed, s.leftoverSince = nil, time.Time{}
	}
	for _, c := range s.children {
		if !c.exited || !c.started {
			continue
		}
		if leftovers && now.Before(c.killFrom.Add(giveUpAfter)) {
			continue
		}
		if leftovers {
			left := ""
			for _, pid := range tree[s.self] {
				if s.byPid[pid] == nil {
					left += " " + itoa(pid)
				}
			}
			say(c.stderr, "giving up on processes SIGKILL does not end:"+left)
		}
		s.reply(encodeReply(opExit, c.id, uint32(c.status)))
		s.drop(c)
	}
	if s.gone && len(s.children) == 0 && !leftovers {
		syscall.Exit(0)
	}
}

// signalAll sends each of pids SIGTERM once (noted in termed) until
// killFrom, then SIGKILL.
func signalAll(pids []int, now, killFrom time.Time, termed map[int]bool) {
	for _, pid := range pids {
		if now.Before(killFrom) {
			if !termed[pid] {
				termed[pid] = true
				syscall.Kill(pid, syscall.SIGTERM)
			}
			continue
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// drop forgets c, and closes what the supervisor held of its pipes.
func (s *supervisor) drop(c *child) {
	delete(s.children, c.id)
	if s.byPid[c.pid] == c {
		delete(s.byPid, c.pid)
	}
	for _, fd := range append(c.outputs, c.stderr) {
		if fd > 2 {
			syscall.Close(fd)
		}
	}
}

// reply writes one message to mcp-mux; if mcp-mux is gone, nobody needs it.
func (s *supervisor) reply(b []byte) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for len(b) > 0 {
		n, err := syscall.Write(3, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		b = b[n:]
	}
}

// reap collects every child as it exits. With no child it waits for the
// next fork.
func (s *supervisor) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil: // ECHILD
			<-s.kick
			continue
		}
		s.reaped <- reaped{pid: pid, status: ws}
	}
}

// drainEvery is how often the supervisor reads what a left backend
// writes at most: a pipe's buffer (64 KiB) fits in between, past which the
// backend waits.
const drainEvery = 20 * time.Millisecond

// readEnds opens a non-blocking read end of each of fds that is a pipe,
// by its name in /proc (close-on-exec: no backend gets them): once mcp-mux
// has left the backend to the supervisor and is gone, nobody else reads
// them, and a backend that writes as it ends would die of SIGPIPE (or fail
// with EPIPE) within its grace.
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

// sigIgn is the disposition SIG_IGN.
const sigIgn = 1

// setDisposition sets sig's disposition at the kernel, past Go's runtime
// (which does not look again).
func setDisposition(sig syscall.Signal, handler uint64) {
	var act [8]uint64 // handler, then no flags, no restorer, an empty mask, in any layout
	act[0] = handler
	syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
}
