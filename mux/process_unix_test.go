//go:build unix

package mux

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
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

// freezeProcess makes pid answer nothing any more (it still runs). kill
// only queues SIGSTOP: each thread stops when it next gets a CPU, and on
// a loaded machine one that had not yet read the request that followed
// and answered it (/proc said R after the answer). So it returns once
// every thread of pid is stopped.
func freezeProcess(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		return // no /proc to see it stop in (macOS): the signal is all there is
	}
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("every thread of process %d to stop", pid), func() bool {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		for _, p := range tasks {
			if procState(p) != 'T' {
				return false
			}
		}
		return len(tasks) > 0
	})
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	s := procState(fmt.Sprintf("/proc/%d/stat", pid))
	return s != 0 && s != 'Z'
}

// procState is the state letter of a /proc stat file (R, S, T, Z...), 0
// if it cannot be read.
func procState(path string) byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// The name before it is in parentheses and may hold any of them.
	s := string(data)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ')' {
			if i+2 < len(s) {
				return s[i+2]
			}
			return 0
		}
	}
	return 0
}
