//go:build unix

package rendezvous

import (
	"net"
	"os"
	"syscall"
)

// File is c, a session's unix socket after the hello, as a non-blocking
// file of its own, which mcp-mux reads and writes with raw system calls
// (wire.PipeIO) as it does the agent's pipes: through the net package a
// line paid the runtime's system-call bookkeeping (a sysmon wake-up) at
// both ends of the hop. c is closed. Nil, and c left as it is, where that
// cannot be done.
func File(c net.Conn) *os.File {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil
	}
	nfd := -1
	if raw.Control(func(fd uintptr) {
		if d, err := syscall.Dup(int(fd)); err == nil {
			nfd = d
		}
	}) != nil || nfd < 0 {
		return nil
	}
	syscall.CloseOnExec(nfd)
	if syscall.SetNonblock(nfd, true) != nil {
		syscall.Close(nfd)
		return nil
	}
	c.Close()
	return os.NewFile(uintptr(nfd), "mcp-mux session")
}

// CloseWrite ends the writing side of f, a socket File made: the other end
// reads its end, and can still write.
func CloseWrite(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Shutdown(int(fd), syscall.SHUT_WR) }); err != nil {
		return err
	}
	return serr
}
