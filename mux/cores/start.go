package cores

import (
	"os"
	"runtime"
)

// Every mcp-mux process starts on one thread, from this package's init:
// most launches are sessions that relay to the shared process, which never
// need a second, and the runtime's P per core spread the allocations of
// the packages' inits over a span and a page cache per P. A session's
// Anonymous memory was 2.41-2.45 MB with a P per core (2) against
// 2.06-2.07 MB with one from here (and 1.75 MB with GOMAXPROCS=1 in its
// environment, before the runtime starts: what is left is the runtime's
// own start). So this package initializes early, right after os: its
// imports are few and early. What needs more cores asks for them back
// (Host).

// host is what the runtime gave the process at its start: a thread per
// core, a container's limit, or GOMAXPROCS from the environment.
var host = startOnOne()

func startOnOne() int {
	n := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" || isTest(os.Args) {
		return n // the user's choice; a test binary keeps its cores
	}
	runtime.GOMAXPROCS(1)
	return n
}

// Host is the threads the runtime gave mcp-mux at its start: one per core,
// a container's limit, or GOMAXPROCS from the environment. The process
// runs on one until it asks for more.
func Host() int { return host }

func isTest(args []string) bool {
	for _, a := range args[min(1, len(args)):] {
		if len(a) > 6 && a[:6] == "-test." { // not package strings: it initializes later
			return true
		}
	}
	return false
}
