package mux

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// suspendThread is kernel32's SuspendThread, which x/sys/windows lacks.
var suspendThread = windows.NewLazySystemDLL("kernel32.dll").NewProc("SuspendThread")

// killProcess ends pid at once, as a crash would.
func killProcess(pid int) {
	h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return
	}
	windows.TerminateProcess(h, 1)
	windows.CloseHandle(h)
}

// killedReason is how a backend's exit after killProcess is told.
const killedReason = "exit status 1"

// freezeProcess makes pid answer nothing any more (it still runs): its
// threads are suspended, which is what SIGSTOP does on Unix.
func freezeProcess(t *testing.T, pid int) {
	t.Helper()
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	n := 0
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != uint32(pid) {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			t.Fatal(err)
		}
		// SuspendThread returns the previous suspend count, -1 on failure.
		if r, _, err := suspendThread.Call(uintptr(th)); int32(r) == -1 {
			t.Fatal(err)
		}
		windows.CloseHandle(th)
		n++
	}
	if n == 0 {
		t.Fatalf("no thread of process %d", pid)
	}
}

// processAlive reports whether pid runs.
func processAlive(pid int) bool {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 0)
	return err == nil && ev == uint32(windows.WAIT_TIMEOUT)
}

// processCPU is not measured on Windows: 0.
func processCPU() time.Duration { return 0 }
