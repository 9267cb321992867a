// Package supervisor is what runs between mcp-mux and its backends on
// Linux: mcp-mux's own executable run again with argv[0] Arg0, which this
// package's init recognizes; it then starts backends and supervises them
// without ever returning. One supervisor serves every backend of an mcp-mux
// process. It imports only sync, syscall, time and unsafe, so that Go
// initializes it about as early as any package: a supervisor never pays
// for the rest of mcp-mux's initialization, nor for its memory. An mcp-mux
// that will start backends starts the supervisor ahead of need (see
// StartStandby).
package supervisor

import "time"

// Arg0 is the argv[0] that makes a binary importing this package act as a
// supervisor.
const Arg0 = "mcp-mux-supervisor"

// execArg0 is the argv[0] of what the supervisor forks for each backend:
// the same executable, which makes itself a subreaper and execs the
// backend (see runExec).
const execArg0 = "mcp-mux-backend"

// Env is a supervisor's whole environment: nothing of mcp-mux's (a
// race-enabled build, the tests, would otherwise sleep 1 s before the
// supervisor exits), and one P: it waits on a pipe and signals, and the Go
// runtime starting a P per core cost a third of its start-up CPU (16.6 vs
// 11.0 ms task-clock, perf stat, 2 cores), which ten backends starting at
// once pay ten times.
var Env = []string{"GORACE=atexit_sleep_ms=0", "GOMAXPROCS=1"}

// Launch is the backend's command as os/exec resolved it, which mcp-mux
// sends the supervisor in a Start message (see EncodeStart). It goes over
// the lifeline, not argv or an environment, so that env values are in the
// backend's environment only.
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

// The lifeline, fd 3 of the supervisor, is a stream socket: mcp-mux's
// end is the only one, and its end (mcp-mux closed it or died, however)
// is the supervisor's signal to end every backend. On it mcp-mux sends
// Start, Cut and Leave messages, each for one backend by an id of its
// choosing, and the supervisor answers each Start with Pid or Error, then,
// once the backend exited and what it started is gone, Exit. Each message
// is one op byte, the id (4 bytes), then the op's fields; numbers are
// 4 bytes, little-endian.
const (
	opStart = 'S' // a Launch (Encode), the backend's stdin, stdout and stderr on its first byte (SCM_RIGHTS)
	opCut   = 'C' // nothing more
	opLeave = 'L' // the grace in milliseconds
	opPid   = 'P' // the backend's pid
	opError = 'E' // a string: why the backend did not start
	opExit  = 'X' // the backend's wait status
)

// EncodeStart is the message that starts a backend: id, then l. The
// sender attaches the backend's stdin, stdout and stderr to its first
// byte.
func EncodeStart(id uint32, l Launch) []byte {
	return append(appendUint32([]byte{opStart}, id), l.Encode()...)
}

// EncodeCut is the end of backend id's own lifeline: the supervisor ends
// its tree at once, or, if mcp-mux left it the backend (EncodeLeave),
// after its grace.
func EncodeCut(id uint32) []byte { return appendUint32([]byte{opCut}, id) }

// EncodeLeave is the order mcp-mux writes just before it exits without
// waiting for backend id: when the backend's lifeline ends (mcp-mux gone,
// and the backend's stdin closed with it), the supervisor gives the
// backend grace to exit by itself, then ends what is left below it
// (SIGTERM, then SIGKILL shortly after), instead of killing it all at
// once. Until then nothing changes: the backend runs while mcp-mux does.
func EncodeLeave(id uint32, grace time.Duration) []byte {
	ms := min(max(grace.Milliseconds(), 0), 1<<32-1)
	return appendUint32(appendUint32([]byte{opLeave}, id), uint32(ms))
}

// Reply is one message of the supervisor's: Pid (Op 'P'), Error ('E') or
// Exit ('X') of backend ID.
type Reply struct {
	Op     byte
	ID     uint32
	Pid    int
	Err    string
	Status uint32 // a syscall.WaitStatus
}

// Started, Failed and Exited say which reply r is.
func (r Reply) Started() bool { return r.Op == opPid }
func (r Reply) Failed() bool  { return r.Op == opError }
func (r Reply) Exited() bool  { return r.Op == opExit }

// ParseReply reads the first reply in b: n is how many bytes it took, 0
// if b does not hold all of it yet; ok is false if b is no reply.
func ParseReply(b []byte) (r Reply, n int, ok bool) {
	if len(b) == 0 {
		return r, 0, true
	}
	rd := reader{b: b[1:]}
	r.Op = b[0]
	var complete bool
	switch r.Op {
	case opPid, opExit:
		var v uint32
		if r.ID, complete = rd.uint32(); complete {
			v, complete = rd.uint32()
		}
		r.Pid, r.Status = int(v), v
		if r.Op == opExit {
			r.Pid = 0
		} else {
			r.Status = 0
		}
	case opError:
		if r.ID, complete = rd.uint32(); complete {
			r.Err, complete = rd.string()
		}
	default:
		return r, 0, false
	}
	if !complete {
		return Reply{}, 0, true
	}
	return r, len(b) - len(rd.b), true
}

// request is one message of mcp-mux's (see opStart and the others).
type request struct {
	op     byte
	id     uint32
	launch []byte // Start: the Launch as encoded, its length included
	stdio  []int  // Start: the backend's stdin, stdout and stderr, or nil
	grace  time.Duration
}

// parseRequest reads the first request in b: used is how many bytes it
// took, 0 if b does not hold all of it yet; ok is false if b is no request.
func parseRequest(b []byte) (r request, used int, ok bool) {
	if len(b) == 0 {
		return r, 0, true
	}
	rd := reader{b: b[1:]}
	r.op = b[0]
	var complete bool
	switch r.op {
	case opStart:
		var size uint32
		if r.id, complete = rd.uint32(); complete {
			size, complete = rd.uint32()
		}
		if size > maxLaunch {
			return r, 0, false
		}
		if complete && uint64(len(rd.b)) >= uint64(size) {
			// The Launch as Encode made it, length included.
			start := len(b) - len(rd.b) - 4
			r.launch = append([]byte(nil), b[start:start+4+int(size)]...)
			rd.b = rd.b[size:]
		} else {
			complete = false
		}
	case opCut:
		r.id, complete = rd.uint32()
	case opLeave:
		var ms uint32
		if r.id, complete = rd.uint32(); complete {
			ms, complete = rd.uint32()
		}
		r.grace = time.Duration(ms) * time.Millisecond
	default:
		return r, 0, false
	}
	if !complete {
		return request{}, 0, true
	}
	return r, len(b) - len(rd.b), true
}

func encodeReply(op byte, id, v uint32) []byte {
	return appendUint32(appendUint32([]byte{op}, id), v)
}

func encodeError(id uint32, msg string) []byte {
	return appendString(appendUint32([]byte{opError}, id), msg)
}

// maxLaunch bounds the command mcp-mux sends: a command line and an
// environment.
const maxLaunch = 16 << 20

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
