//go:build unix

package rendezvous

import (
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
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

// Hungup reports whether the other end of f, a socket File made, closed
// both ways (its process is gone), not only its writing side (CloseWrite).
func Hungup(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	hung := false
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: hupEvents}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			hung = fds[0].Revents&unix.POLLHUP != 0
		}
	})
	return hung
}
