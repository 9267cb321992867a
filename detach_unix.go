//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// startDetached starts the command newCmd makes as a session of its own:
// the agent's end, or a signal to its process group, does not end the
// shared mcp-mux.
func startDetached(newCmd func() *exec.Cmd) (*exec.Cmd, error) {
	cmd := newCmd()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd, cmd.Start()
}
