package backends

import (
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
	// Nothing of mux's environment; a race-enabled build (the tests) would
	// otherwise sleep 1 s before the supervisor exits. One P: it waits on a
	// pipe and signals, and the Go runtime starting a P per core cost a
	// third of its start-up CPU (16.6 vs 11.0 ms task-clock, perf stat,
	// 2 cores), which ten backends starting at once pay ten times.
	sup.Env = []string{"GORACE=atexit_sleep_ms=0", "GOMAXPROCS=1"}
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
	p := &proc{cmd: sup, lifeline: ctlW}
	// end lets the supervisor go (the lifeline cut), and reaps it.
	end := func() error {
		repR.Close()
		p.cut()
		done := make(chan error, 1)
		go func() { done <- sup.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Second):
			sup.Process.Kill()
			return <-done
		}
	}

	deadline := time.Now().Add(launchTimeout)
	ctlW.SetWriteDeadline(deadline)
	if _, err := ctlW.Write(msg); err != nil {
		werr := end()
		return nil, fmt.Errorf("its supervisor did not take the command: %w (%s)", err, exitReason(werr))
	}
	repR.SetReadDeadline(deadline)
	report, err := io.ReadAll(repR)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		end()
		return nil, fmt.Errorf("not started within %s", launchTimeout)
	}
	line := strings.TrimSuffix(string(report), "\n")
	if rest, ok := strings.CutPrefix(line, "error "); ok {
		end()
		return nil, errors.New(rest)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "pid "))
	if err != nil || !strings.HasPrefix(line, "pid ") {
		return nil, fmt.Errorf("its supervisor failed: %s", exitReason(end()))
	}
	repR.Close()
	p.pid = pid
	return p, nil
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
	return &proc{cmd: cmd, pid: cmd.Process.Pid, unsupervised: true}, nil
}
