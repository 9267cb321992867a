package subs

import (
	"fmt"
	"runtime"
	"testing"
)

// The benchmarks use the mux's typical shape: many sessions, each holding a
// few dozen to a hundred URIs on one backend. Strings are built before the
// timed part because in the mux they come from decoded requests anyway.

const (
	benchSessions = 1000
	benchURIs     = 100
	benchTotal    = benchSessions * benchURIs
)

func benchNames() (sessions, uris []string) {
	sessions = make([]string, benchSessions)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("session-%04d", i)
	}
	uris = make([]string, benchURIs)
	for i := range uris {
		uris[i] = fmt.Sprintf("file:///workspace/project/src/pkg%02d/file%02d.go", i/10, i%10)
	}
	return sessions, uris
}

func noop() error { return nil }

func noopUn(string) error { return nil }

// fill subscribes every session to every URI; the first holder of each URI
// forwards, like a real session set.
func fill(r *Registry, sessions, uris []string) {
	for _, s := range sessions {
		for _, u := range uris {
			r.Subscribe(s, "backend", u, Forwarded, noop)
		}
	}
}

func BenchmarkSubscribe(b *testing.B) {
	sessions, uris := benchNames()
	r := New(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % benchTotal
		if j == 0 && i > 0 {
			// Start over so every iteration is a new subscription and the
			// registry does not grow without bound.
			b.StopTimer()
			r = New(0)
			b.StartTimer()
		}
		r.Subscribe(sessions[j/benchURIs], "backend", uris[j%benchURIs], Forwarded, noop)
	}
}

func BenchmarkUnsubscribe(b *testing.B) {
	sessions, uris := benchNames()
	var r *Registry
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % benchTotal
		if j == 0 {
			b.StopTimer()
			r = New(0)
			fill(r, sessions, uris)
			b.StartTimer()
		}
		r.Unsubscribe(sessions[j/benchURIs], uris[j%benchURIs], noopUn)
	}
}

// BenchmarkSubscribers looks up a deep URI in a registry holding 100k
// subscriptions, a few of them on the URI's ancestors.
func BenchmarkSubscribers(b *testing.B) {
	sessions, uris := benchNames()
	r := New(0)
	fill(r, sessions, uris)
	deep := "file:///workspace/project/src/a/b/c/d/e/f/g/h/i/j/file.go"
	r.Subscribe("watcher-1", "backend", "file:///workspace/project", Forwarded, noop)
	r.Subscribe("watcher-2", "backend", "file:///workspace/project/src/a/b/c/", Forwarded, noop)
	r.Subscribe("watcher-3", "backend", deep, Forwarded, noop)
	if got := len(r.Subscribers("backend", deep)); got != 3 {
		b.Fatalf("Subscribers = %d sessions, want 3", got)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Subscribers("backend", deep)
	}
}

// BenchmarkMemoryPer100k reports the heap cost of one subscription, with
// 1,000 sessions x 100 URIs. "shared" is the usual case (sessions watch the
// same resources, 100 keys); "distinct" gives every session its own URIs
// (100k keys), the worst case for per-key overhead.
func BenchmarkMemoryPer100k(b *testing.B) {
	for _, shared := range []bool{true, false} {
		name := "distinct"
		if shared {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) {
			sessions, uris := benchNames()
			all := make([][]string, len(sessions))
			for i := range sessions {
				if shared {
					all[i] = uris
					continue
				}
				all[i] = make([]string, len(uris))
				for j, u := range uris {
					all[i][j] = fmt.Sprintf("%s?s=%d", u, i)
				}
			}
			var perSub float64
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				r := New(0)
				for si, s := range sessions {
					for _, u := range all[si] {
						r.Subscribe(s, "backend", u, Forwarded, noop)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if r.Len() != benchTotal {
					b.Fatalf("Len = %d", r.Len())
				}
				perSub = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / benchTotal
				runtime.KeepAlive(r)
			}
			b.ReportMetric(perSub, "B/sub")
		})
	}
}
