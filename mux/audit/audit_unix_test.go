//go:build unix

package audit

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/log"
)

// A writer that cannot keep up (here: a pipe nobody reads yet) costs
// lines, counted, never the caller's time; every line is either written,
// whole, or counted as dropped; Record after Close does nothing.
func TestRecordNeverWaitsAndCountsWhatItDrops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	// Opening a FIFO to write waits for a reader: one that reads nothing
	// until the records are made.
	rc := make(chan *os.File, 1)
	go func() {
		r, err := os.Open(path)
		if err != nil {
			t.Error(err)
		}
		rc <- r
	}()
	l, err := Open(path, false, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	r := <-rc
	defer r.Close()

	const n = 3 * queueLen
	start := time.Now()
	for i := range n {
		l.Record(Entry{Time: time.Now(), Backend: "b", Method: "tools/call", Target: "t", Outcome: "ok", ArgNames: []string{"a", "b"}, Duration: time.Duration(i)})
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("%d records took %s: Record waited for the writer", n, d)
	}
	if l.Dropped() == 0 {
		t.Fatalf("no line dropped with the writer blocked for %d records", n)
	}
	lines := make(chan int, 1)
	go func() {
		count := 0
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var ln map[string]any
			if json.Unmarshal(sc.Bytes(), &ln) != nil || ln["backend"] != "b" || ln["tool"] != "t" {
				t.Errorf("line %d is not whole: %q", count+1, sc.Bytes())
			}
			count++
		}
		lines <- count
	}()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Record(Entry{Backend: "after"}) // after Close: nothing, no panic
	if got := <-lines + int(l.Dropped()); got != n {
		t.Errorf("written %d + dropped %d = %d, want %d", got-int(l.Dropped()), l.Dropped(), got, n)
	}
}
