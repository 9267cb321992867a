//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// detach makes cmd a session of its own: the agent's end, or a signal to
// its process group, does not end the shared mcp-mux.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
