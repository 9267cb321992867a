//go:build unix && !linux

package backends

import "syscall"

// sysProcAttr puts the backend in its own process group. There is no
// parent-death signal outside Linux: there the stdin-EOF path is what stops a
// backend whose mux died.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
