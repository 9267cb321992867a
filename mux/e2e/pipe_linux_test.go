package e2e

import (
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// waitPipeFull waits until the pipe r reads (an *os.File) holds all it
// can but a page (FIONREAD against F_GETPIPE_SZ): its writer is blocked
// on it, or will be at its next write.
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
	var held, size int
	full := func() bool {
		var e1, e2 error
		rc.Control(func(fd uintptr) {
			held, e1 = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
			size, e2 = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
		})
		if e1 != nil || e2 != nil {
			t.Fatalf("FIONREAD: %v, F_GETPIPE_SZ: %v", e1, e2)
		}
		return held >= size-os.Getpagesize()
	}
	if !testkit.Poll(10*time.Second, full) {
		t.Fatalf("the pipe holds %d bytes of %d after 10 s: its writer is not blocked", held, size)
	}
}
