package tracing

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strings"
)

// W3C Trace Context (https://www.w3.org/TR/trace-context/): the
// traceparent and tracestate an agent puts in _meta, read as the
// OpenTelemetry Go SDK's propagator (propagation.TraceContext, v1.47.0)
// reads them, so that what mcp-mux accepts, drops and passes on is what
// it was when that propagator did it.

type (
	traceID [16]byte
	spanID  [8]byte
)

// The trace flags mcp-mux passes on: the specification's two. Any other
// bit an agent sets is not passed on (a later version's meaning).
const (
	flagSampled = 0x01
	flagRandom  = 0x02
)

// parent is the agent's span as its traceparent and tracestate name it.
type parent struct {
	trace traceID
	span  spanID
	flags byte   // flagSampled and flagRandom only
	state string // its tracestate, valid and re-written, or ""
}

// parseTraceparent reads a traceparent: version-traceid-spanid-flags,
// lowercase hex. Version 00 allows nothing after the flags and no flag
// but the two it defines; a later version (not ff, which is invalid) may
// add fields after a "-", which are ignored, and its unknown flags are
// dropped. All-zero ids are invalid.
//
// As the SDK's propagator, version 00 followed by a lone "-" is accepted
// (it cuts at "-" and then finds nothing left).
func parseTraceparent(h string) (p parent, ok bool) {
	if h == "" {
		return parent{}, false
	}
	var version, flags [1]byte
	if !cutHex(version[:], &h) || version[0] == 0xff {
		return parent{}, false
	}
	if !cutHex(p.trace[:], &h) || !cutHex(p.span[:], &h) || !cutHex(flags[:], &h) {
		return parent{}, false
	}
	if version[0] == 0 && (h != "" || flags[0] > flagSampled|flagRandom) {
		return parent{}, false
	}
	if p.trace == (traceID{}) || p.span == (spanID{}) {
		return parent{}, false
	}
	p.flags = flags[0] & (flagSampled | flagRandom)
	return p, true
}

// cutHex decodes the part of *h before the next "-" (or all of it) into
// dst, and leaves the rest in *h. The part must be exactly dst's length
// in lowercase hex: uppercase is not allowed by the specification.
func cutHex(dst []byte, h *string) bool {
	part, rest, _ := strings.Cut(*h, "-")
	*h = rest
	if len(part) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, lo := unhex(part[2*i]), unhex(part[2*i+1])
		if hi > 0xf || lo > 0xf {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return 0xff
}

// formatTraceparent is the version 00 traceparent of a span.
func formatTraceparent(t traceID, s spanID, flags byte) string {
	var b [55]byte
	copy(b[:], "00-")
	hex.Encode(b[3:35], t[:])
	b[35] = '-'
	hex.Encode(b[36:52], s[:])
	b[52] = '-'
	hex.Encode(b[53:], []byte{flags & (flagSampled | flagRandom)})
	return string(b[:])
}

// maxTracestateMembers is the specification's limit on list members.
const maxTracestateMembers = 32

// parseTracestate is ts as it is passed on: its members separated by ","
// alone (blanks around them and empty ones gone), or "" when ts is not
// valid as a whole (a member that is not key=value with a valid key and
// value, a key twice, more than 32 members): the SDK's propagator drops
// an invalid tracestate entirely, keeping the traceparent.
func parseTracestate(ts string) string {
	if ts == "" {
		return ""
	}
	var keys [maxTracestateMembers]string
	n := 0
	var b strings.Builder
	for rest := ts; rest != ""; {
		var m string
		m, rest, _ = strings.Cut(rest, ",")
		if m == "" {
			continue
		}
		k, v, ok := strings.Cut(m, "=")
		if !ok {
			return ""
		}
		k, v = strings.TrimLeft(k, " \t"), strings.TrimRight(v, " \t")
		if !validKey(k) || !validValue(v) {
			return ""
		}
		for _, seen := range keys[:n] {
			if seen == k {
				return ""
			}
		}
		if n == maxTracestateMembers {
			return ""
		}
		keys[n] = k
		n++
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	return b.String()
}

// validKey: a simple key (lcalpha, then up to 255 of lcalpha, digits,
// "_-*/"), or tenant@system (tenant: lcalpha or digit, then up to 240;
// system: lcalpha, then up to 13).
func validKey(k string) bool {
	tenant, system, multi := strings.Cut(k, "@")
	if !multi {
		return keyPart(k, 255, false)
	}
	return keyPart(tenant, 240, true) && keyPart(system, 13, false)
}

func keyPart(k string, rest int, digitFirst bool) bool {
	if k == "" || len(k)-1 > rest {
		return false
	}
	if c := k[0]; !(c >= 'a' && c <= 'z' || digitFirst && c >= '0' && c <= '9') {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*' || c == '/') {
			return false
		}
	}
	return true
}

// validValue: 1 to 256 printable ASCII characters but "," and "=", the
// last not a space.
func validValue(v string) bool {
	if v == "" || len(v) > 256 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return v[len(v)-1] != ' '
}

// newTraceID and newSpanID are random ids, never all zero (which would
// be invalid), from math/rand/v2's generator as the SDK's: ChaCha8,
// seeded by the runtime, not guessable from earlier ids.
func newTraceID() (t traceID) {
	for t == (traceID{}) {
		binary.BigEndian.PutUint64(t[:8], rand.Uint64())
		binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t
}

func newSpanID() (s spanID) {
	for s == (spanID{}) {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}
