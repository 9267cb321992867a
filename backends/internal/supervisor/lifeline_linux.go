package supervisor

import "syscall"

// readLifeline reads mcp-mux's requests until the lifeline ends (mcp-mux
// closed it, or is gone), then closes requests.
func (s *supervisor) readLifeline() {
	defer close(s.requests)
	var buf []byte
	var fds []int // received, for the Starts to come, in order
	chunk := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(8*4))
	for {
		n, oobn, _, _, err := syscall.Recvmsg(3, chunk, oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for i := range msgs {
				got, _ := syscall.ParseUnixRights(&msgs[i])
				fds = append(fds, got...)
			}
		}
		buf = append(buf, chunk[:n]...)
		for {
			r, used, ok := parseRequest(buf)
			if !ok {
				return // mcp-mux's bug: ending everything is all that is safe
			}
			if used == 0 {
				break
			}
			buf = buf[used:]
			if r.op == opStart && len(fds) >= 3 {
				r.stdio, fds = fds[:3:3], fds[3:]
			}
			s.requests <- r
		}
		if len(buf) == 0 {
			buf = nil // not to keep a launch's environment
		}
	}
}

// start forks what becomes the backend (runExec) with its stdio, and has a
// goroutine hand it the command and learn how its exec went.
func (s *supervisor) start(r request) {
	// The supervisor keeps the backend's stderr, for its own words about
	// the backend, until it reports the backend's end.
	kept := false
	defer func() {
		for i, fd := range r.stdio {
			if i != 2 || !kept {
				syscall.Close(fd)
			}
		}
	}()
	fail := func(msg string) { s.reply(encodeError(r.id, oneLine(msg))) }
	if s.children[r.id] != nil {
		fail("the supervisor already has a backend of that id")
		return
	}
	if r.stdio == nil {
		fail("the supervisor got no stdio for the backend")
		return
	}
	l, ok := decode(r.launch[4:])
	if !ok {
		fail("reading the command from mcp-mux: malformed")
		return
	}
	launch := r.launch
	pid, onCmd, onReport := 0, -1, -1
	if sp := s.takeSpare(); sp != nil {
		if rest, ok := startOnSpare(sp, launch, r.stdio); ok {
			pid, onCmd, onReport, launch = sp.pid, sp.sock, sp.report, rest
		}
	}
	if pid == 0 {
		var err error
		if pid, onCmd, onReport, err = forkBackend(l, r.stdio); err != nil {
			fail("fork/exec " + l.Path + ": " + inDir(l.Dir, err))
			return
		}
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	c := &child{id: r.id, pid: pid, stderr: r.stdio[2], outputs: readEnds(r.stdio[1], r.stdio[2])}
	kept = true
	if s.notSubreaper != "" {
		say(c.stderr, s.notSubreaper)
	}
	s.children[r.id], s.byPid[pid] = c, c
	go func() {
		msg := handOver(onCmd, onReport, launch)
		s.launched <- launched{id: r.id, msg: msg}
	}()
}

// inDir is why a fork into dir failed: the kernel's word for a directory
// that cannot be entered is only an errno, which reads as the command's.
func inDir(dir string, err error) string {
	var st syscall.Stat_t
	if dir != "" {
		if e := syscall.Stat(dir, &st); e != nil {
			return "chdir " + dir + ": " + e.Error()
		}
	}
	return err.Error()
}

// forkBackend forks what becomes the backend l (runExec) with its stdio:
// its pid, and this end of the pipe its launch goes on and of the one its
// report comes back on (see handOver). Called from the main thread (see
// loop).
func forkBackend(l Launch, stdio []int) (pid, cmd, report int, err error) {
	var c, rep [2]int
	if err := syscall.Pipe2(c[:], syscall.O_CLOEXEC); err != nil {
		return 0, 0, 0, err
	}
	if err := syscall.Pipe2(rep[:], syscall.O_CLOEXEC); err != nil {
		syscall.Close(c[0])
		syscall.Close(c[1])
		return 0, 0, 0, err
	}
	// In its own process group (which mcp-mux signals to stop it), in
	// its directory (where a relative path is looked up), killed if the
	// supervisor's main thread, which forks it, dies: that thread lives
	// as long as the supervisor.
	pid, err = syscall.ForkExec("/proc/self/exe", []string{execArg0}, &syscall.ProcAttr{
		Dir:   l.Dir,
		Env:   Env,
		Files: []uintptr{uintptr(stdio[0]), uintptr(stdio[1]), uintptr(stdio[2]), uintptr(c[0]), uintptr(rep[1])},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	syscall.Close(c[0])
	syscall.Close(rep[1])
	if err != nil {
		syscall.Close(c[1])
		syscall.Close(rep[0])
		return 0, 0, 0, err
	}
	return pid, c[1], rep[0], nil
}

// handOver writes the launch to what becomes the backend (on cmd, then
// closed) and reads its report until the exec closes it: empty if the
// exec went through, else why not.
func handOver(cmd, report int, launch []byte) string {
	for b := launch; len(b) > 0; {
		n, err := syscall.Write(cmd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break // it died: its report, or its exit, says why
		}
		b = b[n:]
	}
	syscall.Close(cmd)
	var msg []byte
	var buf [512]byte
	for len(msg) < 64<<10 {
		n, err := syscall.Read(report, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		msg = append(msg, buf[:n]...)
	}
	syscall.Close(report)
	return string(msg)
}
