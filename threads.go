package main

import (
	"context"
	"os"
	"runtime"
	"strconv"

	"github.com/mcp-mux/mcp-mux/mux/cores"
)

// oneThread runs mcp-mux's Go code on one OS thread at a time, unless
// GOMAXPROCS in the environment says otherwise: over stdio, in the shared
// mcp-mux, and over HTTP while the work is one agent's (httpThreads).
//
// A request through mcp-mux is a chain of hand-offs (the agent's pipe or
// connection, the request's goroutine, the backend's pipe, back), each a
// few microseconds of work between waits. With a P per core, readying a
// goroutine woke a thread on another core to run it, and idle threads
// spun looking for work: on this 2-vCPU VM, shared with the agent and the
// backend, each wake-up costs tens of microseconds and takes a core they
// wait for. Measured with the benchmark, same runs:
//   - stdio (when this was set for stdio only): resources/read p50
//     ×2.16 → ×1.94 of direct, tools/call p50 ×2.07 → ×1.66, CPU
//     ×0.85 → ×0.60, 8 callers' throughput unchanged;
//   - serve --http with the go-sdk client (-only gosdk): mcp-mux's CPU
//     per call 424 → 203 µs, one session's calls/s ×0.73 → ×0.95 of
//     direct, its p50 ×1.49 → ×1.14; 8 sessions pinned to the handshake
//     era ×0.87 → ×0.95.
//
// Blocking system calls still get threads of their own, so a backend that
// stops reading blocks nothing else. The cost is a ceiling of one core for
// mcp-mux's own work: thousands of requests a second, far above what one
// agent sends, but not what a team's serve --http may have to serve.
// Start decodes the remembered catalogs before this, on every core.
func oneThread() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// everyCore gives the process back every core the runtime gave it (the
// process starts on one: mux/cores), for work that runs on all of them:
// Start decodes the remembered catalogs on every core.
func everyCore() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(cores.Host())
	}
}

// httpThreads is oneThread for serve --http, and the rule (mux/cores)
// that gives the process back every core the runtime gave it (every CPU,
// or a container's limit) while several requests are in flight, and
// takes it back to one when they are over; nil if GOMAXPROCS in the
// environment says how many, or there is one core. Run it with
// runThreads.
//
// Measured on the 2-vCPU VM (-only gosdk, two runs of 3 rounds and a
// -quick, the machine shared), against the same binary with GOMAXPROCS=1
// in the same rounds: 1 session calls/s ×0.94–1.07, p50 ×1.00–1.12 (it
// stays on one thread: noise); 8 sessions ×0.79–1.30; 32 sessions
// ×0.71–0.82. There the client and the fixture take the cores the second
// thread would use, and mcp-mux's own work is a quarter of one: the rule
// is for hosts with cores to spare, where one is mcp-mux's ceiling.
func httpThreads() *cores.Rule {
	all := cores.Host()
	oneThread()
	if os.Getenv("GOMAXPROCS") != "" || all < 2 {
		return nil
	}
	r := cores.New(all, runtime.GOMAXPROCS)
	// Where one thread keeps up with any load the host can make (a small
	// one, shared with the agents and backends), the rule can be seen at
	// work only with a lower bar: the tests set it.
	if v, err := strconv.ParseFloat(os.Getenv(SaturatedEnv), 64); err == nil && v > 0 {
		r.Saturated = v
	}
	return r
}

// SaturatedEnv sets the share of one core at which serve --http takes
// more threads (default cores.SaturatedAt).
const SaturatedEnv = "MCP_MUX_SATURATED_AT"

// runThreads runs rule (if any) until ctx ends or stop is called, which
// waits for it.
func runThreads(ctx context.Context, rule *cores.Rule) (stop func()) {
	if rule == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { rule.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}
