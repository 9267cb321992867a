package backends

import (
	"syscall"

	"golang.org/x/sys/windows"
)

// signalGroup is the Unix process-group signal mapped onto the backend's
// job: SIGKILL ends every process in the job at once; any other signal is
// the polite ask, a CTRL_BREAK to the backend's process group (console
// programs exit on it by default; node sees SIGBREAK, Go programs
// os.Interrupt). The ask reaches only the processes sharing mcp-mux's
// console, and goes out only while the backend's own process, the group's
// root, runs, its handle held: for an id that is not a group's, Windows
// signals every process of the console, mcp-mux included
// (microsoft/terminal#335).
func signalGroup(pid int, sig syscall.Signal) error {
	j := lookupJob(pid)
	if j == nil {
		return nil
	}
	if sig == syscall.SIGKILL {
		if j.h == 0 {
			return j.leader.Kill()
		}
		return windows.TerminateJobObject(j.h, terminateCode)
	}
	var err error
	j.leader.WithHandle(func(h uintptr) {
		if ev, werr := windows.WaitForSingleObject(windows.Handle(h), 0); werr != nil || ev != uint32(windows.WAIT_TIMEOUT) {
			return // exited: its id may no longer be a group's
		}
		err = windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(pid))
	})
	return err
}

// groupAlive reports whether any process of the backend's job still runs.
func groupAlive(pid int) bool {
	j := lookupJob(pid)
	return j != nil && j.active()
}
