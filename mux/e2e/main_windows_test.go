package e2e

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
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

// processChildren maps each running process to its children, from a
// snapshot of the process table.
func processChildren() map[int][]int {
	children := map[int][]int{}
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return children
	}
	defer windows.CloseHandle(snap)
	pe := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &pe); err == nil; err = windows.Process32Next(snap, &pe) {
		children[int(pe.ParentProcessID)] = append(children[int(pe.ParentProcessID)], int(pe.ProcessID))
	}
	return children
}

// processMemoryCounters is PROCESS_MEMORY_COUNTERS, which x/sys/windows
// does not define.
type processMemoryCounters struct {
	Cb                                                 uint32
	PageFaultCount                                     uint32
	PeakWorkingSetSize, WorkingSetSize                 uintptr
	QuotaPeakPagedPoolUsage, QuotaPagedPoolUsage       uintptr
	QuotaPeakNonPagedPoolUsage, QuotaNonPagedPoolUsage uintptr
	PagefileUsage, PeakPagefileUsage                   uintptr
}

var getProcessMemoryInfo = windows.NewLazySystemDLL("kernel32.dll").NewProc("K32GetProcessMemoryInfo")

// peakRSS is a process's peak working set in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(h)
	c := processMemoryCounters{Cb: uint32(unsafe.Sizeof(processMemoryCounters{}))}
	if r, _, err := getProcessMemoryInfo.Call(uintptr(h), uintptr(unsafe.Pointer(&c)), uintptr(c.Cb)); r == 0 {
		t.Fatal(err)
	}
	return int64(c.PeakWorkingSetSize)
}

// signalProcess sends p a Unix signal's Windows counterpart. There,
// SIGINT and SIGTERM are console control events (Ctrl-C, Ctrl-Break,
// closing the console), which reach only the processes of a process
// group sharing the sender's console: the tests start mcp-mux in no such
// group, and under Wine 8 GenerateConsoleCtrlEvent fails whatever the
// console. SIGHUP has no counterpart (the config file's watch reloads).
func signalProcess(t *testing.T, p *os.Process, sig syscall.Signal) {
	t.Helper()
	canSignal(t, sig)
}

// canSignal skips t, which will send sig: the tests cannot send one on
// Windows.
func canSignal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if sig == syscall.SIGHUP {
		t.Skip("no SIGHUP on Windows: a saved config file is reloaded by its watch (TestReload*)")
	}
	testkit.SkipUnderWine(t, "no console control events (GenerateConsoleCtrlEvent fails), the Windows form of "+sig.String())
	t.Skip("the tests start mcp-mux in no console process group of its own, which CTRL_BREAK needs: " + sig.String() + " is not sent")
}

// stopProcess ends p for a test's cleanup: SIGTERM on Unix; on Windows,
// which has none to send it, TerminateProcess.
func stopProcess(p *os.Process) { p.Kill() }
