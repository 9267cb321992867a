package e2e

import (
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// waitPipeFull waits until the pipe r reads (an *os.File) has no room
// left: its writer is blocked on it, or will be at its next write. The
// pipe's writable end, opened anew through /proc/self/fd, polls as
// writable while a buffer slot is free. (A count of the bytes held cannot
// say it: pages written in part, or read in part, hold less than 4 KiB.)
func waitPipeFull(t *testing.T, r io.Reader) {
	t.Helper()
	f, ok := r.(*os.File)
	if !ok {
		t.Fatalf("%T is not a pipe's file", r)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var held int
	full := func() bool {
		var room bool
		var err error
		rc.Control(func(fd uintptr) {
			held, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
			w, e := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if e != nil {
				err = e
				return
			}
			defer unix.Close(w)
			p := []unix.PollFd{{Fd: int32(w), Events: unix.POLLOUT}}
			_, err = unix.Poll(p, 0)
			room = p[0].Revents&unix.POLLOUT != 0
		})
		if err != nil {
			t.Fatalf("polling the pipe's writable end: %v", err)
		}
		return !room
	}
	if !testkit.Poll(10*time.Second, full) {
		t.Fatalf("the pipe still has room after 10 s (%d bytes held): its writer is not blocked", held)
	}
}
