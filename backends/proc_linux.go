package backends

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/mcp-mux/mcp-mux/backends/internal/supervisor"
)

// On Linux every backend runs under the supervisor of its mcp-mux process:
// mcp-mux's own executable run again (see package supervisor), one for all
// the backends, which starts each, passes its stdio through untouched, and
// kills every process under a backend when it exits or mcp-mux goes away,
// however mcp-mux ends (supervisor_linux.go).

// launchTimeout bounds the supervisor's start and its exec of the backend
// (a hung network file system must not hang mcp-mux).
const launchTimeout = 10 * time.Second

// startProc starts cmd's program under the supervisor, which is started
// first if there is none.
func startProc(cmd *exec.Cmd) (*proc, error) {
	if cmd.Err != nil { // e.g. not found on PATH, as cmd.Start would say
		return nil, cmd.Err
	}
	sup, err := theSupervisor()
	if errors.Is(err, fs.ErrNotExist) {
		// No /proc (a bare chroot): better a backend as before than none.
		return startUnsupervised(cmd)
	}
	if err != nil {
		return nil, fmt.Errorf("starting its supervisor: %w", err)
	}
	fds, opened, err := stdioFiles(cmd)
	if err != nil {
		return nil, err
	}
	defer closeAll(opened...)
	return sup.start(cmd, fds)
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

// StartStandby starts the supervisor of the first backend ahead of it, as
// soon as mcp-mux knows it will start backends (it serves, or checks with
// --connect): the backend then starts a few milliseconds sooner. A session
// that relays to the shared process starts none.
func StartStandby() { supervisor.StartStandby() }

// DiscardStandby lets the standby supervisor go: mcp-mux will start no
// backend process (its backends are remote, or there are none), and the
// standby would only wait until mcp-mux ends.
func DiscardStandby() { supervisor.DiscardStandby() }

// stdioFiles is cmd's stdin, stdout and stderr as fds for the supervisor
// to take: files (as Backend's are: pipes), or /dev/null for none, which
// it opened (for the caller to close once they are sent). Like os/exec, it
// leaves them blocking, as a program expects its stdio.
func stdioFiles(cmd *exec.Cmd) (fds []int, opened []*os.File, err error) {
	for _, s := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		switch f := s.(type) {
		case *os.File:
			fds = append(fds, int(f.Fd()))
		case nil:
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				closeAll(opened...)
				return nil, nil, err
			}
			opened = append(opened, null)
			fds = append(fds, int(null.Fd()))
		default:
			closeAll(opened...)
			return nil, nil, fmt.Errorf("a backend's stdio must be files, not %T", s)
		}
	}
	return fds, opened, nil
}

// Supervised is whether each backend process runs under a supervisor that
// outlives mcp-mux to stop it (Leave): on Linux, unless a backend had to
// start without one (no /proc), which Leave then reports.
const Supervised = true
