package mux

import (
	"errors"
	"testing"
	"time"
)

// TestCallStatsCountAndBoundTheirWindow: calls and errors count every
// request; the percentiles are of the last latencyWindow only, so memory
// stays bounded and old latencies stop mattering.
func TestCallStatsCountAndBoundTheirWindow(t *testing.T) {
	var cs callStats
	failed, ok := errors.New("boom"), error(nil)
	// Slow ones first: the window forgets them.
	for range 100 {
		cs.observe("a", time.Now().Add(-time.Hour), &ok)
	}
	for i := range latencyWindow {
		e := &ok
		if i%4 == 0 {
			e = &failed
		}
		// 1 ms .. 512 ms, ascending.
		cs.observe("a", time.Now().Add(-time.Duration(i+1)*time.Millisecond), e)
	}
	s := cs.snapshot("a")
	if s.calls != 100+latencyWindow || s.errors != latencyWindow/4 {
		t.Fatalf("calls %d errors %d, want %d and %d", s.calls, s.errors, 100+latencyWindow, latencyWindow/4)
	}
	if got := len(cs.byName["a"].recent); got != latencyWindow {
		t.Fatalf("%d latencies kept, want %d", got, latencyWindow)
	}
	// Nearest rank: the 256th and the 487th of 512, each observed a
	// little over its nominal duration.
	if s.p50 < 256*time.Millisecond || s.p50 > 300*time.Millisecond || s.p95 < 487*time.Millisecond || s.p95 > 530*time.Millisecond {
		t.Fatalf("p50 %v p95 %v, want about 256ms and 487ms", s.p50, s.p95)
	}
	if s := cs.snapshot("unknown"); s != (callSnapshot{}) {
		t.Fatalf("a backend never called: %+v", s)
	}
}
