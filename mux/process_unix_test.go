//go:build unix

package mux

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time this process has used, user and system: what
// a benchmark's op costs on a machine that others load, where its wall
// time does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

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

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ')' {
			return i+2 < len(s) && s[i+2] != 'Z'
		}
	}
	return true
}
