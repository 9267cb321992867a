package catalogmem

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The writer process of TestTwoProcessesOnOneDirectoryLoseNothing: it waits
// for its stdin to close, so that the two start writing together.
func TestWriterProcess(t *testing.T) {
	path := os.Getenv("CATALOGMEM_WRITER_PATH")
	if path == "" {
		t.Skip("run by TestTwoProcessesOnOneDirectoryLoseNothing")
	}
	from, err := strconv.Atoi(os.Getenv("CATALOGMEM_WRITER_FROM"))
	if err != nil {
		t.Fatal(err)
	}
	s := Open(path)
	io.Copy(io.Discard, os.Stdin)
	for i := from; i < from+writerPuts; i++ {
		if _, err := s.Put(identityN(i), sampleEntry()); err != nil {
			t.Fatal(err)
		}
		// A backend both run: each writes what it offered.
		e := sampleEntry()
		e.Instructions = fmt.Sprintf("writer from %d, %d", from, i)
		if _, err := s.Put(identityN(sharedBackend), e); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	writerPuts    = 30
	sharedBackend = 2000
)

func TestTwoProcessesOnOneDirectoryLoseNothing(t *testing.T) {
	path := catalogPath(t)
	// Remembered before either starts: neither may drop it.
	if _, err := Open(path).Put(identityN(1000), sampleEntry()); err != nil {
		t.Fatal(err)
	}

	var cmds []*exec.Cmd
	var starts []io.Closer
	for w := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriterProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			"CATALOGMEM_WRITER_PATH="+path,
			fmt.Sprintf("CATALOGMEM_WRITER_FROM=%d", w*writerPuts))
		start, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		// One writer for both: exec then calls it from one goroutine at a time.
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("writer %d:\n%s", w, out.String())
			}
		})
		cmds, starts = append(cmds, cmd), append(starts, start)
	}
	for _, start := range starts {
		start.Close()
	}
	for w, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("writer %d: %v", w, err)
		}
	}

	final := Open(path)
	for i := range 2 * writerPuts {
		if _, ok := final.Lookup(identityN(i)); !ok {
			t.Errorf("backend %d was lost", i)
		}
	}
	if _, ok := final.Lookup(identityN(1000)); !ok {
		t.Error("the backend remembered before the writers was lost")
	}
	if e, ok := final.Lookup(identityN(sharedBackend)); !ok || !strings.HasPrefix(e.Instructions, "writer from ") {
		t.Errorf("the backend both writers put is %v, %q; want one's", ok, e.Instructions)
	}
}
