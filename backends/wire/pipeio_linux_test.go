package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// pipeIOPair is a pipe whose ends are read and written through PipeIO, as
// mux reads and writes its own stdio and its backends'.
func pipeIOPair(t *testing.T) (r, w io.ReadWriteCloser) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close(); pw.Close() })
	return PipeIO(pr), PipeIO(pw)
}

// Lines written at once from several goroutines arrive whole, each in one
// piece, even when each is larger than the pipe holds (so written in
// parts), as with an *os.File; the reader sees EOF once the writer closed.
func TestPipeIOWritesConcurrentLinesWhole(t *testing.T) {
	r, w := pipeIOPair(t)
	const writers, lines, size = 8, 20, 150 << 10 // 150 KiB: more than a 64 KiB pipe
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			line := append(bytes.Repeat([]byte{byte('a' + g)}, size), '\n')
			for range lines {
				if _, err := w.Write(line); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	go func() { wg.Wait(); w.Close() }()
	br := bufio.NewReaderSize(r, 4096)
	n := 0
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(line) != size+1 || strings.Trim(string(line[:size]), string(line[:1])) != "" {
			t.Fatalf("line %d: %d bytes, mixed: %q...", n, len(line), line[:min(len(line), 40)])
		}
		n++
	}
	if n != writers*lines {
		t.Fatalf("read %d lines, want %d", n, writers*lines)
	}
}

// Closing the file ends a Read that waits for data, as it does an
// *os.File's, so a connection's reader goroutine always ends.
func TestPipeIOReadEndsWhenTheFileIsClosed(t *testing.T) {
	r, _ := pipeIOPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	testkit.Eventually(t, 5*time.Second, "Read to wait in the poller", func() bool {
		return testkit.GoroutineIn("[IO wait", "wire.(*pipeIO).Read(")
	})
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("Read after Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still waits 5 s after Close")
	}
}

// A write to a pipe nobody reads fails with EPIPE rather than killing the
// process, and a file in blocking mode (which a raw call could block on)
// is left to os.File.
func TestPipeIOWriteToAClosedPipeFailsAndBlockingFilesStayFiles(t *testing.T) {
	r, w := pipeIOPair(t)
	r.Close()
	if _, err := w.Write([]byte("x\n")); err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Fatalf("write to a pipe without reader: %v, want broken pipe", err)
	}
	f, err := os.CreateTemp(t.TempDir(), "file")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := PipeIO(f); got != io.ReadWriteCloser(f) {
		t.Fatalf("a regular file became %T", got)
	}
	// A pipe made non-blocking behind the poller's back: a raw read would
	// see EAGAIN with no poller to wait in.
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	unwatched := os.NewFile(uintptr(fds[0]), "unwatched")
	defer unwatched.Close()
	defer syscall.Close(fds[1])
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	if got := PipeIO(unwatched); got != io.ReadWriteCloser(unwatched) {
		t.Fatalf("a non-blocking pipe the poller does not watch became %T", got)
	}
}

// TryWrite never waits: on a full pipe it writes nothing and says so, and
// once the reader made room it writes the line whole.
func TestPipeIOTryWriteWritesWholeOrNothing(t *testing.T) {
	r, w := pipeIOPair(t)
	tw := w.(interface{ TryWrite([]byte) (bool, error) })
	line := append(bytes.Repeat([]byte("y"), 3000), '\n')
	n := 0
	for {
		ok, err := tw.TryWrite(line)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		n++
		if n > 10_000 {
			t.Fatal("TryWrite never found the pipe full")
		}
	}
	br := bufio.NewReader(r)
	for range n {
		got, err := br.ReadBytes('\n')
		if err != nil || !bytes.Equal(got, line) {
			t.Fatalf("read %d bytes (%v), want a whole line of %d", len(got), err, len(line))
		}
	}
	if ok, _ := tw.TryWrite(append(bytes.Repeat([]byte("z"), PipeAtomic), '\n')); ok {
		t.Error("TryWrite wrote a line over PipeAtomic, which a pipe may take in parts")
	}
	if ok, err := tw.TryWrite(line); !ok || err != nil {
		t.Errorf("TryWrite on an emptied pipe: %v, %v", ok, err)
	}
}
