package cores

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// threads records what the rule set, as runtime.GOMAXPROCS would.
type threads struct {
	mu   sync.Mutex
	now  int
	sets []int
}

func (th *threads) set(n int) int {
	th.mu.Lock()
	defer th.mu.Unlock()
	prev := th.now
	th.now = n
	th.sets = append(th.sets, n)
	return prev
}

func (th *threads) get() (int, int) {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.now, len(th.sets)
}

// started runs a rule of 4 cores in the bubble until the test ends, its
// one thread saturated: as if mcp-mux's own work took all of it.
func started(t *testing.T) (*Rule, *threads) {
	return startedAt(t, 1)
}

// startedAt is started with mcp-mux's work taking share of one core.
func startedAt(t *testing.T, share float64) (*Rule, *threads) {
	th := &threads{now: 1}
	r := New(4, th.set)
	began := time.Now()
	r.CPU = func() time.Duration { return time.Duration(share * float64(time.Since(began))) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, th
}

// calls runs n callers, each a request of d after another, for total.
func calls(r *Rule, n int, d, total time.Duration) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for end := time.Now().Add(total); time.Now().Before(end); {
				r.Begin()
				time.Sleep(d)
				r.End()
			}
		})
	}
	wg.Wait()
}

// TestOneAgentStaysOnOneThread: requests one at a time, however many, never
// change the threads, and nothing ticks for them.
func TestOneAgentStaysOnOneThread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, th := started(t)
		calls(r, 1, 300*time.Microsecond, 5*time.Second)
		synctest.Wait()
		if now, sets := th.get(); now != 1 || sets != 0 {
			t.Errorf("one request at a time for 5 s: %d threads after %d changes, want 1 after none", now, sets)
		}
		r.mu.Lock()
		awake := r.awake
		r.mu.Unlock()
		if awake {
			t.Error("one request at a time woke the rule's ticking")
		}
	})
}

// TestLoadRaisesThenIdleLowers: eight callers get every core within
// UpTicks ticks and keep them while they call; one second after they stop
// the process is on one thread again, and the rule sleeps.
func TestLoadRaisesThenIdleLowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, th := started(t)
		loaded := make(chan struct{})
		go func() { calls(r, 8, time.Millisecond, 3*time.Second); close(loaded) }()
		time.Sleep(UpTicks*Tick + Tick/2)
		if now, _ := th.get(); now != 4 {
			t.Fatalf("%v into eight callers' load: %d threads, want 4", UpTicks*Tick+Tick/2, now)
		}
		<-loaded
		if now, sets := th.get(); now != 4 || sets != 1 {
			t.Fatalf("under a steady load: %d threads after %d changes, want 4 after 1", now, sets)
		}
		time.Sleep(DownTicks*Tick - 2*Tick)
		if now, _ := th.get(); now != 4 {
			t.Errorf("idle for %v: %d threads, want 4 still", DownTicks*Tick-2*Tick, now)
		}
		time.Sleep(3 * Tick)
		synctest.Wait()
		if now, sets := th.get(); now != 1 || sets != 2 {
			t.Errorf("idle for %v: %d threads after %d changes, want 1 after 2", DownTicks*Tick+Tick, now, sets)
		}
		r.mu.Lock()
		awake := r.awake
		r.mu.Unlock()
		if awake {
			t.Error("idle on one thread, the rule still ticks")
		}
	})
}

// TestBriefOverlapsChangeNothing: two requests overlapping now and then, a
// tick's worth at most (an agent's parallel tool calls), or a second
// request arriving as the first ends, are one agent's work.
func TestBriefOverlapsChangeNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, th := started(t)
		for range 20 {
			go calls(r, 2, 10*time.Millisecond, Tick)
			time.Sleep(300 * time.Millisecond)
			r.Begin()
			r.Begin()
			r.End()
			time.Sleep(time.Millisecond)
			r.End()
		}
		synctest.Wait()
		if now, sets := th.get(); now != 1 || sets != 0 {
			t.Errorf("brief overlaps: %d threads after %d changes, want 1 after none", now, sets)
		}
	})
}

// TestLoadThatComesAndGoesDoesNotFlap: bursts of load every 600 ms, with
// the process barely idle between them, take the threads up once.
func TestLoadThatComesAndGoesDoesNotFlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, th := started(t)
		for range 10 {
			calls(r, 4, time.Millisecond, 300*time.Millisecond)
			time.Sleep(300 * time.Millisecond)
		}
		if now, sets := th.get(); now != 4 || sets != 1 {
			t.Errorf("load on and off every 300 ms: %d threads after %d changes, want 4 after 1", now, sets)
		}
	})
}

// TestTwoSlowRequestsOfAnIdleProcessChangeNothing: two calls waiting on
// their backends overlap, but the process does nothing meanwhile: no load
// needs a second thread.
func TestTwoSlowRequestsOfAnIdleProcessChangeNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, th := startedAt(t, 0)
		r.Begin()
		r.Begin()
		time.Sleep(10 * UpTicks * Tick)
		if now, changes := th.get(); now != 1 || changes != 0 {
			t.Errorf("two requests waiting for %v: %d threads after %d changes, want 1", 10*UpTicks*Tick, now, changes)
		}
		r.End()
		r.End()
	})
}

// TestOverlapsThatOneThreadKeepsUpWithStayOnOne: requests overlap all the
// time, but mcp-mux's own work takes a third of a core: one thread keeps
// up, and more would only cost (as measured on a 2-core host).
func TestOverlapsThatOneThreadKeepsUpWithStayOnOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, th := startedAt(t, 0.33)
		calls(r, 8, 20*time.Millisecond, 3*time.Second)
		if n, changes := th.get(); n != 1 || changes != 0 {
			t.Errorf("%d threads after %d changes, want 1 after none", n, changes)
		}
	})
}
