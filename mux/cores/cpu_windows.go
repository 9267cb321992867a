//go:build windows

package cores

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time the process used so far, user and system.
func ProcessCPU() time.Duration {
	var created, exited, kernel, user syscall.Filetime
	h, err := syscall.GetCurrentProcess()
	if err != nil || syscall.GetProcessTimes(h, &created, &exited, &kernel, &user) != nil {
		return 0
	}
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}
