package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// baseSoftLimit is the heap's soft limit while the live heap is small.
const baseSoftLimit = 14 << 20

// largeLiveHeap is where the soft limit starts to follow the live heap.
// Below it the 14 MiB limit holds: a burst of 20,000 resources/updated
// peaks at 5-6 MB live (gctrace), and a limit following that raised the
// benchmark's peak RSS from 23.8-24.1 MB to 24.2-24.9 MB.
const largeLiveHeap = 8 << 20

// tuneGC fits the garbage collector to what mcp-mux is: a small,
// long-lived process. Since requests pass through as bytes, Go's default
// pacing (GOGC 100) costs no measurable CPU (GOGC 400 had taken 18% off
// a tools/call when each one went through the go-sdk's typed decoding);
// a soft limit of 14 MiB keeps the heap from growing to that limit's
// worth of garbage under load. Measured against GOGC 400 with a 20 MiB
// limit in four benchmark runs: peak RSS 24.5-24.9 MB (at 15 MiB) vs
// 29.1-30.1 MB, with the same CPU and listing times; 14 MiB against
// 15 MiB in five more: 23.8-24.4 vs 24.6-25.0 MB, again at no cost. At
// 12-13 MiB listing 10 x 1,000 resources slowed down (62 vs 47 ms per
// walk).
//
// A fixed limit is a trap for a large catalog: once the live heap nears
// it, the GC runs without pause (up to half the CPU). So after every GC
// the limit becomes three times the live heap when that is more than
// 8 MiB: listing ten backends of 10,000 resources took 0.94-1.13 s per
// walk and 4.8 s of CPU for five walks under the fixed limit, against
// 0.42-0.48 s and 1.1 s with none. GOGC and GOMEMLIMIT in the environment
// win.
//
// And what a burst left free goes back to the OS once the process is
// quiet (releaseWhenQuiet). The returned func stops all of it.
func tuneGC() (stop func()) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	debug.SetMemoryLimit(baseSoftLimit)
	r := &releaser{sample: readReleaseSample, release: debug.FreeOSMemory}
	followLiveHeap(r)
	return r.stop
}

// gcTick is an object that lives until the next GC: its finalizer runs
// once per cycle. (Not a tiny object: those may never be finalized.)
type gcTick struct{ _ [32]byte }

// followLiveHeap sets the soft limit after each GC from the live heap it
// left, and arms r, until r is stopped.
func followLiveHeap(r *releaser) {
	sample := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&gcTick{}, func(*gcTick) {
			if r.stopped.Load() {
				return
			}
			metrics.Read(sample)
			if ok := allUint64(sample); ok {
				limit := int64(baseSoftLimit)
				live := int64(sample[0].Value.Uint64())
				if live > largeLiveHeap {
					limit = 3 * live
				}
				// The limit counts the runtime's memory besides the heap
				// (stacks, GC metadata: goroutines of HTTP sessions), and
				// must leave the heap room to double, or the GC runs
				// every few MB allocated: a tool search over 416 tools
				// spent a third of its CPU in the GC at 4-5 MB live.
				other := int64(sample[1].Value.Uint64() - sample[2].Value.Uint64() - sample[3].Value.Uint64() -
					sample[4].Value.Uint64() - sample[5].Value.Uint64())
				limit = max(limit, other+2*live)
				if debug.SetMemoryLimit(-1) != limit {
					debug.SetMemoryLimit(limit)
				}
			}
			r.afterGC()
			arm()
		})
	}
	arm()
}

func allUint64(samples []metrics.Sample) bool {
	for _, s := range samples {
		if s.Value.Kind() != metrics.KindUint64 {
			return false
		}
	}
	return true
}

// quietAfter is how long mcp-mux must allocate next to nothing before
// the heap it holds free goes back to the OS. (A var for the test.)
var quietAfter = 5 * time.Second

const (
	// quietAllocs: allocating less than this in quietAfter is quiet.
	quietAllocs = 1 << 20
	// releaseAtLeast: less free heap than this is not worth a GC. At
	// 4 MiB, 100 idle HTTP sessions kept ~2-3 MB free, ~75 KiB of RSS
	// each against ~48 KiB with this; a GC of a small heap costs a few ms
	// of CPU, once per quiet spell.
	releaseAtLeast = 1 << 20
)

// releaser gives the heap's free memory back to the OS once the process
// is quiet. The runtime keeps the free heap up to its next GC goal (twice
// the live heap at GOGC 100) resident, for the allocations to come: 1,000
// HTTP sessions opening left ~40 MB free beside ~30 MB live, and an idle
// session cost ~77 KiB of RSS instead of ~45 KiB. A quiet process has no
// allocations to come, and its GC will not run again to let the runtime's
// scavenger shrink the goal: so after quietAfter without a GC, if less
// than quietAllocs were allocated meanwhile and at least releaseAtLeast is
// free beyond what the last release left (kept), releaser runs
// debug.FreeOSMemory (one GC). Its GC re-arms the check, which then finds
// nothing more to free and stops: an idle process is not woken again. A
// busy one never gets that far: each GC pushes the check back.
type releaser struct {
	stopped atomic.Bool
	// sample and release are readReleaseSample and debug.FreeOSMemory; a
	// test gives a runtime of its own.
	sample  func() (allocs, free uint64)
	release func()

	mu     sync.Mutex
	timer  *time.Timer
	allocs uint64 // /gc/heap/allocs:bytes when armed
	// kept is the free heap the last release left. A forced GC and
	// scavenge does not always bring it to zero: on a loaded machine
	// 1-3.5 MiB stayed free across repeated releases in a process that
	// allocated nothing. Counted from zero, every check would find that
	// much again and force a GC each quietAfter, forever, in an idle
	// process; counted from what the runtime kept, there is nothing more
	// to gain, and the checks stop.
	kept uint64
}

var releaseSample = []string{"/gc/heap/allocs:bytes", "/memory/classes/heap/free:bytes", "/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes"}

func readReleaseSample() (allocs, free uint64) {
	s := make([]metrics.Sample, len(releaseSample))
	for i, name := range releaseSample {
		s[i].Name = name
	}
	metrics.Read(s)
	if !allUint64(s) {
		return 0, 0
	}
	// Dead objects not yet collected are free too, to a GC.
	dead := s[2].Value.Uint64() - min(s[2].Value.Uint64(), s[3].Value.Uint64())
	return s[0].Value.Uint64(), s[1].Value.Uint64() + dead
}

// afterGC (re)starts the quiet check.
func (r *releaser) afterGC() {
	allocs, _ := r.sample()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped.Load() {
		return
	}
	r.allocs = allocs
	if r.timer == nil {
		r.timer = time.AfterFunc(quietAfter, r.check)
		return
	}
	r.timer.Reset(quietAfter)
}

func (r *releaser) check() {
	allocs, free := r.sample()
	r.mu.Lock()
	r.kept = min(r.kept, free) // what it kept may have gone back since
	if r.stopped.Load() || free < r.kept+releaseAtLeast {
		r.mu.Unlock()
		return
	}
	if allocs-r.allocs >= quietAllocs {
		r.allocs = allocs
		r.timer.Reset(quietAfter)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.release()
	_, left := r.sample()
	r.mu.Lock()
	r.kept = left
	r.mu.Unlock()
}

func (r *releaser) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped.Store(true)
	if r.timer != nil {
		r.timer.Stop()
	}
}
