//go:build windows

package main

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// startDetached starts the command newCmd makes with no console, in a
// process group of its own (the agent's end, or a Ctrl-C to its console,
// does not end the shared mcp-mux), and out of the agent's job object: an
// agent that runs its MCP servers in a job that kills on close
// (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE) would otherwise take the shared
// process, and every other agent's sessions with it, when it exits. A job
// that forbids breaking away fails the start with ERROR_ACCESS_DENIED: the
// process is then started in that job, and lives as long as it does (the
// other sessions then meet a new one, as after a kill).
func startDetached(newCmd func() *exec.Cmd) (*exec.Cmd, error) {
	const detached = windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS
	cmd := newCmd()
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: detached | windows.CREATE_BREAKAWAY_FROM_JOB}
	err := cmd.Start()
	if !errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		return cmd, err
	}
	cmd = newCmd() // an exec.Cmd starts once
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: detached}
	return cmd, cmd.Start()
}
