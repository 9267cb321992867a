//go:build unix

package mux

import (
	"syscall"
	"testing"
)

// killProcess ends pid at once, as a crash would.
func killProcess(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

// killedReason is how a backend's exit after killProcess is told.
const killedReason = "killed by signal killed"

// freezeProcess makes pid answer nothing any more (it still runs).
func freezeProcess(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}
