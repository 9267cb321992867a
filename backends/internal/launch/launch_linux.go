package launch

import (
	"syscall"
	"unsafe"
)

// prctl options missing from package syscall.
const (
	prSetName           = 15
	prSetChildSubreaper = 36
)

// maxLaunch bounds the message: a command line and an environment.
const maxLaunch = 16 << 20

// backend is what init started: the backend's pid, and mcp-mux's (the
// parent then). pid is 0 in a process that is not a supervisor.
var backend struct{ pid, parent int }

// Started reports the backend this process started as a supervisor, and
// mcp-mux's pid at the time; ok is false in any other process.
func Started() (pid, parent int, ok bool) {
	return backend.pid, backend.parent, backend.pid != 0
}

func init() {
	if !isSupervisor() {
		return
	}
	// fds 3 (the lifeline) and 4 (the report) are the supervisor's alone.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	// After an exec of /proc/self/exe the kernel's name for it is "exe".
	name := []byte("mcp-mux-superv\x00")
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetName, uintptr(unsafe.Pointer(&name[0])), 0)
	// A subreaper before the backend exists: whatever leaves its tree,
	// however early, stays below the supervisor.
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		warn("mcp-mux supervisor: not a subreaper (" + e.Error() + "): a process that leaves the backend's tree can outlive it\n")
	}
	backend.parent = syscall.Getppid()
	pid, err := start()
	if err != "" {
		syscall.Write(4, []byte("error "+oneLine(err)+"\n"))
		syscall.Exit(127)
	}
	backend.pid = pid
	syscall.Write(4, []byte("pid "+itoa(pid)+"\n"))
	syscall.Close(4)
}

// isSupervisor reports whether argv[0] is Arg0, from /proc (package os,
// which has os.Args, is initialized much later).
func isSupervisor() bool {
	fd, err := syscall.Open("/proc/self/cmdline", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	want := Arg0 + "\x00"
	buf := make([]byte, len(want))
	n, _ := readFull(fd, buf)
	return n == len(want) && string(buf) == want
}

// start reads the Launch from the lifeline and starts the backend: in its
// own process group (which mcp-mux signals to stop it), killed if this
// thread (the main thread, which lives as long as the process) dies.
func start() (int, string) {
	var size [4]byte
	if n, _ := readFull(3, size[:]); n < 4 {
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

func warn(s string) { syscall.Write(2, []byte(s)) }

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
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
