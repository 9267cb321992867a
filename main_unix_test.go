//go:build unix

package main

import (
	"os/exec"
	"syscall"
	"testing"
)

// processExists reports whether pid exists (a zombie counts).
func processExists(pid int) bool { return syscall.Kill(pid, 0) == nil }

// killProcess ends pid at once.
func killProcess(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

// clearUmask sets the umask to 0 until the returned func restores it.
func clearUmask(t *testing.T) (restore func()) {
	old := syscall.Umask(0)
	return func() { syscall.Umask(old) }
}

// killGroupOnCancel runs cmd in a process group of its own, which its
// context's end kills whole, even if cmd is stuck.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
