package supervisor

import "syscall"

// runExec is what the supervisor forks for a backend, before it is the
// backend (see becomeBackend). Its stdio is the backend's; fd 3 carries the
// Launch, fd 4 the reason the exec failed, or nothing (the exec closes it).
// It does not return.
func runExec() {
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	l, msg := readLaunch(3)
	if msg == "" {
		msg = becomeBackend(l)
	}
	syscall.Write(4, []byte(oneLine(msg)))
	syscall.Exit(127)
}

// becomeBackend makes this process a subreaper, so that what the backend
// starts stays below the backend, whatever it does (a double fork,
// setsid), until the backend itself is gone: the supervisor can then tell
// one backend's descendants from another's. The attribute holds across the
// exec, which follows at once. It returns only why the exec failed.
func becomeBackend(l Launch) string {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		say(2, "not a subreaper ("+e.Error()+"): a process that leaves the backend's tree can outlive it")
	}
	// syscall.Exec gives the backend the open-files limit the supervisor
	// had before Go raised its own, as os/exec does.
	err := syscall.Exec(l.Path, l.Args, l.Env)
	return "fork/exec " + l.Path + ": " + err.Error()
}

// readLaunch reads the Launch from fd.
func readLaunch(fd int) (Launch, string) {
	var size [4]byte
	if n, _ := readFull(fd, size[:]); n < len(size) {
		return Launch{}, "reading the command from mcp-mux: no command"
	}
	r := reader{b: size[:]}
	length, _ := r.uint32()
	if length > maxLaunch {
		return Launch{}, "reading the command from mcp-mux: command too long"
	}
	msg := make([]byte, 4+length)
	copy(msg, size[:])
	if n, _ := readFull(fd, msg[4:]); n < int(length) {
		return Launch{}, "reading the command from mcp-mux: cut short"
	}
	return parseLaunch(msg)
}

// parseLaunch is the Launch b holds, as EncodeStart's launch is: a 4-byte
// length, then the rest.
func parseLaunch(b []byte) (Launch, string) {
	r := reader{b: b}
	length, ok := r.uint32()
	switch {
	case !ok:
		return Launch{}, "reading the command from mcp-mux: no command"
	case length > maxLaunch:
		return Launch{}, "reading the command from mcp-mux: command too long"
	case len(b)-4 < int(length):
		return Launch{}, "reading the command from mcp-mux: cut short"
	}
	l, ok := decode(b[4 : 4+length])
	if !ok {
		return Launch{}, "reading the command from mcp-mux: malformed"
	}
	return l, ""
}
