package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// TestSoftLimitFollowsALargeLiveHeap: the 14 MiB soft limit is for a small
// catalog; one that keeps more live (ten backends of 10,000 resources) must
// not leave the GC running without pause under a limit it cannot meet.
func TestSoftLimitFollowsALargeLiveHeap(t *testing.T) {
	saved := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(saved) })
	t.Setenv("GOMEMLIMIT", "")
	t.Cleanup(tuneGC())
	if got := debug.SetMemoryLimit(-1); got != baseSoftLimit {
		t.Fatalf("limit at start = %d, want %d", got, baseSoftLimit)
	}

	live := make([][]byte, 0, 40)
	for range 40 {
		live = append(live, make([]byte, 1<<20)) // 40 MiB, live
	}
	// The finalizer that moves the limit runs on its own goroutine, after
	// a GC.
	testkit.Poll(5*time.Second, func() bool { runtime.GC(); return debug.SetMemoryLimit(-1) >= 3*40<<20 })
	if got := debug.SetMemoryLimit(-1); got < 3*40<<20 {
		t.Errorf("limit with 40 MiB live = %d MiB, want at least 120", got>>20)
	}
	runtime.KeepAlive(live)

	live = nil
	testkit.Poll(5*time.Second, func() bool { runtime.GC(); return debug.SetMemoryLimit(-1) == baseSoftLimit })
	if got := debug.SetMemoryLimit(-1); got != baseSoftLimit {
		t.Errorf("limit once the heap is small again = %d MiB, want 14", got>>20)
	}
}
