package search

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// Benchmarks on synthetic catalogs made from the real one (catalog.json,
// 416 tools): copies of it whose backends are renamed (github, github2,
// github3, ...), cut to the size measured.
//
//	go test -run XXX -bench . -benchmem ./mux/search

// syntheticDocs is n docs: the real catalog, then copies with renamed
// backends, until there are n.
func syntheticDocs(tb testing.TB, n int) []Doc {
	real := loadDocs(tb)
	docs := make([]Doc, 0, n)
	for copyN := 1; len(docs) < n; copyN++ {
		for _, d := range real {
			if len(docs) == n {
				break
			}
			if copyN > 1 {
				d.Backend = fmt.Sprintf("%s%d", d.Backend, copyN)
				d.Name = d.Backend + "__" + d.Tool
			}
			docs = append(docs, d)
		}
	}
	return docs
}

// BenchmarkSearch is one search_tools query (limit 5) over n tools; the
// queries are the tasks of tasks.json in turn. It reports the median and
// 95th percentile of single queries besides the mean (ns/op), and the CPU
// time per query, which a busy machine inflates less than the others.
func BenchmarkSearch(b *testing.B) {
	tasks := loadTasks(b)
	for _, n := range []int{400, 4000, 40000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ix := New(syntheticDocs(b, n))
			times := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, cpuOK := cpuTime()
			for i := range b.N {
				start := time.Now()
				ix.Search(tasks[i%len(tasks)].Task, DefaultLimit, nil)
				times = append(times, time.Since(start))
			}
			cpu1, _ := cpuTime()
			b.StopTimer()
			if cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(times[len(times)*95/100].Microseconds()), "p95-µs")
		})
	}
}

// BenchmarkNew builds the index of n tools. ns/op and B/op are per build;
// it also reports them per 1,000 tools, and the heap the built index keeps
// (what the server holds while the catalog stays the same).
func BenchmarkNew(b *testing.B) {
	for _, n := range []int{416, 4000, 40000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			docs := syntheticDocs(b, n)
			kept := retained(func() any { return New(docs) })
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, cpuOK := cpuTime()
			for range b.N {
				New(docs)
			}
			cpu1, _ := cpuTime()
			b.StopTimer()
			per := 1000 / float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*per/1e6, "ms/1k-tools")
			if cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N)*per/1e6, "cpu-ms/1k-tools")
			}
			b.ReportMetric(float64(kept)*per/1024, "KiB-kept/1k-tools")
		})
	}
}

// retained is how much heap what build returns keeps alive.
func retained(build func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}
