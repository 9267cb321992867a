//go:build unix

package search

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (user and system), which
// other processes on a busy machine do not inflate as they do wall time.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
