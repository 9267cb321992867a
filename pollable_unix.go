//go:build unix

package main

import (
	"os"
	"runtime"
	"syscall"
)

// pollable returns f (stdin or stdout) as a file the Go runtime waits on
// with its poller if it is a pipe or a socket, as it is under an agent. A
// blocking read or write holds a thread in the kernel, and the runtime
// then needs another thread, woken, to run anything else: on a small VM
// that was tens of microseconds per request. restore puts the file back in
// blocking mode for whoever shares it after mcp-mux exits.
func pollable(f *os.File) (_ *os.File, restore func()) {
	fd := int(f.Fd())
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return f, func() {}
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK:
	default:
		return f, func() {} // a terminal or a file is left as it is
	}
	if syscall.SetNonblock(fd, true) != nil {
		return f, func() {}
	}
	nf := os.NewFile(uintptr(fd), f.Name())
	return nf, func() {
		_ = syscall.SetNonblock(fd, false)
		runtime.KeepAlive(nf) // its finalizer would close fd, which another file might then get
	}
}
