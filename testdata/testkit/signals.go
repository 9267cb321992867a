package testkit

import (
	"bytes"
	"encoding/json"
	"runtime"
)

// The waits of this file are for a moment a test can observe instead of
// sleeping until it has probably come: a request at the server, a
// goroutine blocked where the test needs it, a process in a system call.

// Arrived makes a condition for Eventually: whether the fixture has
// received a request besides its stats calls since Arrived was called.
// requests calls the fixture's stats tool once and returns its
// "requests" (see Requests), which counts every request the fixture
// received, that stats call included. Call Arrived before sending the
// request to wait for: then each stats call after it reports one more
// than the one before, unless another request came between them.
//
// The request is counted as it enters the fixture's handler: a "hang"
// or "sleep" it arrived with is then running, or about to.
func Arrived(requests func() int) func() bool {
	last := requests()
	return func() bool {
		n := requests()
		came := n > last+1
		last = n
		return came
	}
}

// Requests is "requests" in the text of the fixture's stats result, or -1
// if it has none.
func Requests(stats string) int {
	var st struct {
		Requests *int `json:"requests"`
	}
	if json.Unmarshal([]byte(stats), &st) != nil || st.Requests == nil {
		return -1
	}
	return *st.Requests
}

// GoroutineIn reports whether a goroutine of this process has every one of
// frames in its stack (each a substring of a line of runtime.Stack's
// dump): say, "(*pipeIO).Read" and "runtime_pollWait" for one blocked in
// the poller under a Read. The goroutine calling it never counts.
func GoroutineIn(frames ...string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := bytes.Split(buf, []byte("\n\n"))
	for _, s := range stacks[1:] { // the first is the caller's
		all := true
		for _, f := range frames {
			if !bytes.Contains(s, []byte(f)) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
