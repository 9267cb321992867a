package e2e

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/windows"
)

// processExists reports whether pid runs.
func processExists(pid int) bool {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 0)
	return err == nil && ev == uint32(windows.WAIT_TIMEOUT)
}

// killProcess ends pid at once.
func killProcess(pid int) {
	if h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(pid)); err == nil {
		windows.TerminateProcess(h, 1)
		windows.CloseHandle(h)
	}
}

// clearUmask: Windows has no umask, nor Unix file modes to test.
func clearUmask(t *testing.T) (restore func()) {
	t.Skip("no umask or Unix file modes on Windows")
	return nil
}

// killGroupOnCancel: the context's end kills cmd (what it started is
// left to the job objects mcp-mux puts its backends in).
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &windows.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP}
	cmd.Cancel = func() error { return cmd.Process.Kill() }
}
