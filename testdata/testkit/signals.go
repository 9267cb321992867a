package testkit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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
// frames in its stack, each a substring of a line of runtime.Stack's dump:
// a function ("(*pipeIO).Read(") or the state in the goroutine's first line
// ("[select", "[IO wait", "[chan receive"), say, for one blocked in a
// select or in the poller under that function. (The dump leaves out the
// runtime's own frames, selectgo and gopark among them: the state says
// where the goroutine waits.) The goroutine calling it never counts.
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

// InSyscall reports whether a thread of process pid is in system call
// sysno (syscall.SYS_READ, say) with fd as its first argument, per
// /proc/PID/task/*/syscall: a process blocked reading a pipe, or waiting
// on one. Linux only (false elsewhere, and where /proc does not show it).
func InSyscall(pid int, sysno uintptr, fd int) bool {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/syscall")
	for _, p := range tasks {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(data))
		if len(f) < 2 {
			continue // "running", or "-1 ..." (not in a system call)
		}
		nr, err1 := strconv.ParseUint(f[0], 10, 64)
		arg, err2 := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
		if err1 == nil && err2 == nil && uintptr(nr) == sysno && arg == uint64(fd) {
			return true
		}
	}
	return false
}

// ProcStatus is the field name of /proc/PID/status ("SigIgn", "State"),
// "" if there is none. Linux only.
func ProcStatus(pid int, name string) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// SignalsIgnored reports whether process pid has the disposition SIG_IGN
// for every one of sigs, per SigIgn in /proc/PID/status: the kernel then
// discards such a signal when it is sent, so that nothing can follow
// from it. Linux only.
func SignalsIgnored(pid int, sigs ...int) bool {
	mask, err := strconv.ParseUint(ProcStatus(pid, "SigIgn"), 16, 64)
	if err != nil {
		return false
	}
	for _, s := range sigs {
		if s < 1 || s > 64 || mask&(1<<(s-1)) == 0 {
			return false
		}
	}
	return true
}

// ReadSyscalls is syscr of /proc/PID/io: the read system calls process pid
// made so far, counted as each returns (one that returned 0, at EOF,
// too); -1 if unknown. Linux only.
func ReadSyscalls(pid int) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
