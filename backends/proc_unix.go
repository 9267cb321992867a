//go:build unix && !linux

package backends

import (
	"os/exec"
	"syscall"
)

// startProc starts cmd in its own process group, so that stopping it
// reaches grandchildren too. There is no parent-death signal nor subreaper
// outside Linux: there the stdin-EOF path is what stops a backend whose mux
// died, and a descendant that ignores EOF or leaves the group survives it.
func startProc(cmd *exec.Cmd) (*proc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &proc{cmd: cmd, wait: cmd.Wait, pid: cmd.Process.Pid}, nil
}

// StartStandby and DiscardStandby do nothing: only on Linux does mcp-mux
// start a supervisor ahead of its first backend.
func StartStandby()   {}
func DiscardStandby() {}

// Supervised is whether each backend process runs under a supervisor that
// outlives mcp-mux to stop it (Leave): not here, where mcp-mux has to stop
// every backend itself before it exits.
const Supervised = false
