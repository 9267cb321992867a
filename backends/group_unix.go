//go:build unix

package backends

import (
	"errors"
	"syscall"
)

// signalGroup sends sig to every process in the group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// groupAlive reports whether any process of the group led by pid still exists.
func groupAlive(pid int) bool {
	return syscall.Kill(-pid, 0) == nil
}
