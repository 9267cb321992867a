// Package cores decides how many threads run mcp-mux's Go code while it
// serves HTTP (`serve --http`): one while the requests come one at a
// time, as one agent's do, and every core the host gives once several are
// in flight for a while, as a team's are; one again when that is over.
//
// One thread is what one agent's work costs least on (the main package's
// threads.go says why: each hand-off woke a thread on another core), but it
// is a ceiling of one core for a process that serves many agents. The
// signal is the requests in flight, averaged over a tick, while the one
// thread is saturated (its CPU share, SaturatedAt): then the load needs
// more. The way back follows the requests alone: a sampled CPU share
// would not do there, since idle threads spinning for work raise the very
// share that would have to fall for the threads to be given back.
//
// Hysteresis keeps runtime.GOMAXPROCS, which stops the world, rare: the
// threads go up after UpTicks ticks in a row averaging UpAt requests in
// flight or more (100 ms), down after DownTicks ticks in a row averaging
// under DownBelow (1 s). So it changes at most twice in 1.1 s, and never
// under a steady load. While one thread serves and requests do not
// overlap, nothing ticks: a request costs a lock and a clock read.
package cores

import (
	"context"
	"sync"
	"time"
)

const (
	// Tick is how often the requests in flight are averaged.
	Tick = 50 * time.Millisecond
	// UpAt is the average of requests in flight, over a tick, at which a
	// tick counts towards more threads.
	UpAt = 1.5
	// UpTicks ticks in a row at UpAt or over give the process every core.
	UpTicks = 2
	// DownBelow is the average under which a tick counts towards one
	// thread again: between it and UpAt the threads stay as they are.
	DownBelow = 1.2
	// DownTicks ticks in a row under DownBelow take the process back to
	// one thread.
	DownTicks = 20
	// SaturatedAt is the share of one core mcp-mux's own work must take
	// over a tick for the tick to count towards more threads: overlapping
	// requests alone are not a load that needs them. On a 2-core host
	// shared with the agents and the backends, 32 sessions ran ×0.71-0.82
	// as fast on two threads as on one, with mcp-mux at about a quarter
	// of a core: a thread that keeps up is the cheapest.
	SaturatedAt = 0.8
)

// Rule follows the requests in flight and sets the threads by them. Begin
// and End bracket each request that is an agent's work; Run, whose caller
// owns it, ticks while there is something to decide.
type Rule struct {
	max int
	set func(int) int // runtime.GOMAXPROCS, or a test's
	// CPU is the process's CPU time so far (ProcessCPU); a test's may be
	// set before Run.
	CPU func() time.Duration
	// Saturated is the share of one core at which the load needs more
	// threads (SaturatedAt); it may be set before Run.
	Saturated float64

	wake chan struct{} // Begin to Run: requests overlap, start ticking

	mu     sync.Mutex
	n      int           // requests in flight
	last   time.Time     // when n last changed, or the window began
	since  time.Time     // when the window began
	area   time.Duration // n integrated over the window: request-time
	awake  bool          // Run ticks (or has been told to)
	raised bool          // the process runs on max threads
}

// New is the rule for a process whose cores are max threads, setting them
// with set (runtime.GOMAXPROCS). It starts on one thread: the caller has
// set that already.
func New(max int, set func(int) int) *Rule {
	return &Rule{max: max, set: set, wake: make(chan struct{}, 1), CPU: ProcessCPU, Saturated: SaturatedAt}
}

// Begin counts a request in flight; End must follow when it is over.
func (r *Rule) Begin() {
	now := time.Now()
	r.mu.Lock()
	r.advance(now)
	r.n++
	wake := r.n >= 2 && !r.awake
	if wake {
		// The window starts with the overlap, not with the last tick.
		r.awake, r.since, r.area = true, now, 0
	}
	r.mu.Unlock()
	if wake {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// End counts a request over.
func (r *Rule) End() {
	now := time.Now()
	r.mu.Lock()
	r.advance(now)
	r.n--
	r.mu.Unlock()
}

// advance adds the time since the last change to the window's area.
// Called with mu held.
func (r *Rule) advance(now time.Time) {
	if r.awake {
		r.area += time.Duration(r.n) * now.Sub(r.last)
	}
	r.last = now
}

// window is the average of requests in flight since the window began,
// and begins the next.
func (r *Rule) window(now time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance(now)
	avg := 0.0
	if d := now.Sub(r.since); d > 0 {
		avg = float64(r.area) / float64(d)
	}
	r.since, r.area = now, 0
	return avg
}

// sleep stops the ticking if nothing is left to decide: one thread, and
// requests not overlapping now. It reports whether it did.
func (r *Rule) sleep() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.raised || r.n >= 2 {
		return false
	}
	r.awake = false
	return true
}

// Run decides until ctx ends, ticking only while requests overlap or the
// process has more than one thread.
func (r *Rule) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.tick(ctx)
	}
}

// tick ticks until the rule may sleep or ctx ends.
func (r *Rule) tick(ctx context.Context) {
	t := time.NewTicker(Tick)
	defer t.Stop()
	busy, quiet := 0, 0
	lastCPU, lastAt := r.CPU(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			avg := r.window(now)
			cpu := r.CPU()
			share := float64(cpu-lastCPU) / float64(now.Sub(lastAt))
			lastCPU, lastAt = cpu, now
			r.mu.Lock()
			raised := r.raised
			r.mu.Unlock()
			if raised {
				if quiet++; avg >= DownBelow {
					quiet = 0
				}
				if quiet >= DownTicks {
					r.setRaised(false)
					busy = 0
				}
			} else {
				if busy++; avg < UpAt || share < r.Saturated {
					busy = 0
				}
				if busy >= UpTicks {
					r.setRaised(true)
					quiet = 0
				}
			}
			if busy == 0 && r.sleep() {
				return
			}
		}
	}
}

// setRaised sets the threads: max if up, else one. Only Run's goroutine
// calls it, so the flag and the threads cannot disagree for long.
func (r *Rule) setRaised(up bool) {
	r.mu.Lock()
	r.raised = up
	r.mu.Unlock()
	if up {
		r.set(r.max)
	} else {
		r.set(1)
	}
}
