package backends

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-mux/mcp-mux/backends/internal/supervisor"
)

// On Linux every backend runs under a supervisor: mcp-mux's own executable
// run again (see package supervisor), which starts the backend, passes its
// stdio through untouched, and kills every process under it when the
// backend exits or mcp-mux goes away, however mcp-mux ends.

// launchTimeout bounds the supervisor's start and its exec of the backend
// (a hung network file system must not hang mcp-mux).
const launchTimeout = 10 * time.Second

// selfExe runs mcp-mux's own binary: /proc/self/exe rather than
// os.Executable, as it still works when the binary was replaced or deleted on
// disk since mcp-mux started. A variable for tests.
var selfExe = "/proc/self/exe"

// startProc starts cmd's program under a supervisor. fd 3 of the
// supervisor is the lifeline (launch, then EOF when mcp-mux is gone), fd 4
// its report ("pid N" once the backend runs, or "error MESSAGE").
func startProc(cmd *exec.Cmd) (*proc, error) {
	if cmd.Err != nil { // e.g. not found on PATH, as cmd.Start would say
		return nil, cmd.Err
	}
	msg := supervisor.Launch{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir}.Encode()
	if stdio, ok := stdioFiles(cmd); ok {
		if pid, sock, ok := supervisor.TakeStandby(); ok {
			p, err := startOnStandby(stdio, pid, sock, msg)
			if !errors.Is(err, errStandbyGone) {
				return p, err
			}
		}
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		closeAll(ctlR, ctlW)
		return nil, err
	}
	sup := exec.Command(selfExe)
	sup.Args = []string{supervisor.Arg0, cmd.Args[0]} // argv[1] only for ps
	sup.Env = supervisor.Env
	sup.Stdin, sup.Stdout, sup.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	sup.ExtraFiles = []*os.File{ctlR, repW}
	// Its own process group: signals mcp-mux sends the backend's group, and
	// the terminal's, do not reach it. It learns that mcp-mux is gone from
	// its lifeline, which the kernel closes however mcp-mux dies.
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sup.Start(); err != nil {
		closeAll(ctlR, ctlW, repR, repW)
		if errors.Is(err, fs.ErrNotExist) {
			// No /proc (a bare chroot): better a backend as before than none.
			return startUnsupervised(cmd)
		}
		return nil, fmt.Errorf("starting its supervisor: %w", err)
	}
	closeAll(ctlR, repW)
	p := &proc{cmd: sup, wait: sup.Wait, lifeline: ctlW}
	end := letGo(func() { repR.Close(); p.cut() }, sup.Wait, func() { sup.Process.Kill() })

	deadline := time.Now().Add(launchTimeout)
	ctlW.SetWriteDeadline(deadline)
	if _, err := ctlW.Write(msg); err != nil {
		werr := end()
		return nil, fmt.Errorf("its supervisor did not take the command: %w (%s)", err, exitReason(werr))
	}
	repR.SetReadDeadline(deadline)
	report, err := io.ReadAll(repR)
	pid, err := reportedPid(strings.TrimSuffix(string(report), "\n"), err, end)
	if err != nil {
		return nil, err
	}
	repR.Close()
	p.pid = pid
	return p, nil
}

// letGo is what ends a supervisor that did not start its backend: cut
// (its lifeline, and the report's pipe), then reap it by wait, killing it
// after a second.
func letGo(cut func(), wait func() error, kill func()) func() error {
	return func() error {
		cut()
		done := make(chan error, 1)
		go func() { done <- wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Second):
			kill()
			return <-done
		}
	}
}

// reportedPid is the backend's pid from the supervisor's report, line
// (read with err), or why it has none; then end lets the supervisor go.
func reportedPid(line string, err error, end func() error) (int, error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		end()
		return 0, fmt.Errorf("not started within %s", launchTimeout)
	}
	if rest, ok := strings.CutPrefix(line, "error "); ok {
		end()
		return 0, errors.New(rest)
	}
	pid, perr := strconv.Atoi(strings.TrimPrefix(line, "pid "))
	if perr != nil || !strings.HasPrefix(line, "pid ") {
		return 0, fmt.Errorf("its supervisor failed: %s", exitReason(end()))
	}
	return pid, nil
}

// startUnsupervised starts cmd directly, in its own process group, as
// before there was a supervisor: when mcp-mux dies the kernel SIGKILLs the
// backend (its parent-death signal), but what it started and ignores stdin
// EOF, or left its group, can outlive mcp-mux.
func startUnsupervised(cmd *exec.Cmd) (*proc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &proc{cmd: cmd, wait: cmd.Wait, pid: cmd.Process.Pid, unsupervised: true}, nil
}

// DiscardStandby lets the standby supervisor go: mcp-mux will start no
// backend process (its backends are remote, or there are none), and the
// standby would only wait until mcp-mux ends.
func DiscardStandby() { supervisor.DiscardStandby() }

// errStandbyGone is a standby supervisor that was not there to take the
// command (killed, or out of resources): one is started as usual instead.
var errStandbyGone = errors.New("the standby supervisor is gone")

// startOnStandby starts cmd's program under the standby supervisor (pid,
// with its end of the lifeline sock), which mcp-mux started at its own
// start (see supervisor.TakeStandby): what startProc does, less the
// supervisor's own start.
func startOnStandby(stdio []int, pid, sock int, msg []byte) (*proc, error) {
	sup, err := os.FindProcess(pid) // a child: waitable, by pidfd
	if err != nil {
		syscall.Close(sock)
		return nil, fmt.Errorf("%w: %v", errStandbyGone, err)
	}
	wait := func() error {
		st, err := sup.Wait()
		if err == nil && !st.Success() {
			err = &exec.ExitError{ProcessState: st}
		}
		return err
	}
	// Non-blocking, so that the poller gives the lifeline deadlines.
	syscall.SetNonblock(sock, true)
	lifeline := os.NewFile(uintptr(sock), "supervisor lifeline")
	end := letGo(func() { lifeline.Close() }, wait, func() { sup.Kill() })
	lifeline.SetDeadline(time.Now().Add(launchTimeout))
	rights := syscall.UnixRights(stdio...)
	rc, err := lifeline.SyscallConn()
	if err == nil {
		var serr error
		err = rc.Write(func(fd uintptr) bool {
			serr = syscall.Sendmsg(int(fd), []byte{'S'}, rights, nil, syscall.MSG_NOSIGNAL)
			return serr != syscall.EAGAIN
		})
		if err == nil {
			err = serr
		}
	}
	if err != nil {
		end()
		return nil, fmt.Errorf("%w: %v", errStandbyGone, err)
	}
	if _, err := lifeline.Write(msg); err != nil {
		return nil, fmt.Errorf("its supervisor did not take the command: %w (%s)", err, exitReason(end()))
	}
	line, err := readLine(lifeline)
	bpid, err := reportedPid(line, err, end)
	if err != nil {
		return nil, err
	}
	lifeline.SetDeadline(time.Time{})
	return &proc{wait: wait, pid: bpid, lifeline: lifeline}, nil
}

// stdioFiles is cmd's stdin, stdout and stderr as fds, for a standby to
// take: ok only if all three are files (as Backend's are: pipes). Like
// os/exec, it leaves them blocking, as a program expects its stdio.
func stdioFiles(cmd *exec.Cmd) ([]int, bool) {
	var fds []int
	for _, s := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		f, ok := s.(*os.File)
		if !ok {
			return nil, false
		}
		fds = append(fds, int(f.Fd()))
	}
	return fds, true
}

// readLine reads f up to a newline (the supervisor writes one line, then
// nothing) and returns the line without it; what comes before an error or
// EOF, if nothing else.
func readLine(f *os.File) (string, error) {
	var line []byte
	buf := make([]byte, 512)
	for len(line) < 64<<10 {
		n, err := f.Read(buf)
		line = append(line, buf[:n]...)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			return string(line[:i]), nil
		}
		if err != nil {
			return string(line), err
		}
	}
	return string(line), errors.New("the supervisor's report is too long")
}

// Supervised is whether each backend process runs under a supervisor that
// outlives mcp-mux to stop it (Leave): on Linux, unless a backend had to
// start without one (no /proc), which Leave then reports.
const Supervised = true
