// Package supervisor is what runs between mcp-mux and each backend on
// Linux: mcp-mux's own executable run again with argv[0] Arg0, which this
// package's init recognizes; it then starts the backend and supervises it
// without ever returning. It imports only sync, syscall, time and unsafe,
// so that Go initializes it about as early as any package: a supervisor
// starts its backend a few milliseconds after its exec and never pays for
// the rest of mcp-mux's initialization, nor for its memory. The same init,
// in mcp-mux itself, starts the first supervisor ahead of need (see
// TakeStandby).
package supervisor

import "time"

// Arg0 is the argv[0] that makes a binary importing this package act as a
// supervisor.
const Arg0 = "mcp-mux-supervisor"

// StandbyArg, as argv[1], makes a supervisor a standby (see TakeStandby):
// started before the backend is known, it gets the backend's stdio with
// the command, and its lifeline is a socket it also reports on.
const StandbyArg = "standby"

// Env is a supervisor's whole environment: nothing of mcp-mux's (a
// race-enabled build, the tests, would otherwise sleep 1 s before the
// supervisor exits), and one P: it waits on a pipe and signals, and the Go
// runtime starting a P per core cost a third of its start-up CPU (16.6 vs
// 11.0 ms task-clock, perf stat, 2 cores), which ten backends starting at
// once pay ten times.
var Env = []string{"GORACE=atexit_sleep_ms=0", "GOMAXPROCS=1"}

// Launch is what mcp-mux sends the supervisor on the lifeline (fd 3)
// before anything else (see Encode): the backend's command as os/exec
// resolved it. It goes over a pipe, not argv or the supervisor's
// environment, so that env values are in the backend's environment only.
// The supervisor answers on fd 4, once: "pid N" when the backend runs, or
// "error MESSAGE" (a standby, on its lifeline).
type Launch struct {
	Path string
	Args []string
	Env  []string
	Dir  string
}

// Encode is l as sent: a 4-byte length of the rest, then Path, Dir, the
// count of Args, each arg, the count of Env, each entry; each string is a
// 4-byte length and its bytes (any bytes: a path or value need not be
// UTF-8). Lengths are little-endian.
func (l Launch) Encode() []byte {
	b := make([]byte, 4, 64)
	b = appendString(b, l.Path)
	b = appendString(b, l.Dir)
	b = appendUint32(b, uint32(len(l.Args)))
	for _, a := range l.Args {
		b = appendString(b, a)
	}
	b = appendUint32(b, uint32(len(l.Env)))
	for _, e := range l.Env {
		b = appendString(b, e)
	}
	putUint32(b, uint32(len(b)-4))
	return b
}

// decode parses what Encode made (without its length prefix).
func decode(b []byte) (Launch, bool) {
	var l Launch
	var ok bool
	r := reader{b: b}
	l.Path, ok = r.string()
	if !ok {
		return l, false
	}
	if l.Dir, ok = r.string(); !ok {
		return l, false
	}
	if l.Args, ok = r.strings(); !ok {
		return l, false
	}
	if l.Env, ok = r.strings(); !ok {
		return l, false
	}
	return l, len(r.b) == 0
}

// leaveOp starts the order to leave (see EncodeLeave).
const leaveOp = 'L'

// leaveSize is the length of the order to leave.
const leaveSize = 5

// EncodeLeave is the order mcp-mux writes on the lifeline just before it
// exits without waiting for the backend: when the lifeline ends, mcp-mux
// gone and the backend's stdin closed with it, the supervisor gives the
// backend grace to exit by itself, then ends what is left below it
// (SIGTERM, then SIGKILL shortly after), instead of killing it all at
// once. Until then nothing changes: the backend runs while mcp-mux does.
// It is 'L', then the grace in milliseconds (4 bytes, little-endian).
func EncodeLeave(grace time.Duration) []byte {
	ms := min(max(grace.Milliseconds(), 0), 1<<32-1)
	return appendUint32([]byte{leaveOp}, uint32(ms))
}

// decodeLeave parses what EncodeLeave made.
func decodeLeave(b []byte) (time.Duration, bool) {
	if len(b) != leaveSize || b[0] != leaveOp {
		return 0, false
	}
	r := reader{b: b[1:]}
	ms, _ := r.uint32()
	return time.Duration(ms) * time.Millisecond, true
}

type reader struct{ b []byte }

func (r *reader) uint32() (uint32, bool) {
	if len(r.b) < 4 {
		return 0, false
	}
	n := uint32(r.b[0]) | uint32(r.b[1])<<8 | uint32(r.b[2])<<16 | uint32(r.b[3])<<24
	r.b = r.b[4:]
	return n, true
}

func (r *reader) string() (string, bool) {
	n, ok := r.uint32()
	if !ok || uint64(n) > uint64(len(r.b)) {
		return "", false
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s, true
}

func (r *reader) strings() ([]string, bool) {
	n, ok := r.uint32()
	if !ok || uint64(n) > uint64(len(r.b))/4 { // each takes 4 bytes at least
		return nil, false
	}
	out := make([]string, 0, n)
	for range n {
		s, ok := r.string()
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func appendUint32(b []byte, n uint32) []byte {
	return append(b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
}

func putUint32(b []byte, n uint32) {
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
}

func appendString(b []byte, s string) []byte {
	return append(appendUint32(b, uint32(len(s))), s...)
}
