package backends

import "syscall"

// sysProcAttr puts the backend in its own process group, so that stopping it
// reaches grandchildren too (npx → node), and asks the kernel to SIGKILL it if
// mcp-mux dies without cleaning up (kill -9 of the mux must not orphan it).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
