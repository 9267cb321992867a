package tracing

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// The expected results were computed with the OpenTelemetry Go SDK's
// propagator (go.opentelemetry.io/otel/propagation.TraceContext, v1.47.0)
// on the same inputs: mcp-mux reads an agent's trace context as it did.
func TestParseTraceparentAsTheSDKsPropagator(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, c := range []struct {
		in    string
		ok    bool
		flags byte
	}{
		{"00-" + tid + "-" + sid + "-01", true, 0x01},
		{"00-" + tid + "-" + sid + "-00", true, 0x00},
		{"00-" + tid + "-" + sid + "-02", true, 0x02},
		{"00-" + tid + "-" + sid + "-03", true, 0x03},
		{"00-" + tid + "-" + sid + "-04", false, 0}, // a flag version 00 reserves
		{"00-" + tid + "-" + sid + "-ff", false, 0},
		{"00-" + tid + "-" + sid + "-01-", true, 0x01}, // the propagator's leniency
		{"00-" + tid + "-" + sid + "-01-x", false, 0},  // version 00: nothing after the flags
		{"00-" + tid + "-" + sid + "-01x", false, 0},
		{"00-" + tid + "-" + sid[:15] + "-01", false, 0},
		{"00-" + strings.ToUpper(tid) + "-" + sid + "-01", false, 0}, // lowercase only
		{"00-" + tid + "-" + strings.ToUpper(sid) + "-01", false, 0},
		{"00-" + tid + "-" + sid + "-0A", false, 0},
		{"0A-" + tid + "-" + sid + "-01", false, 0},
		{"ff-" + tid + "-" + sid + "-01", false, 0}, // the invalid version
		{"fe-" + tid + "-" + sid + "-01", true, 0x01},
		{"fe-" + tid + "-" + sid + "-01-what-ever", true, 0x01}, // a later version's fields
		{"01-" + tid + "-" + sid + "-0f", true, 0x03},           // its unknown flags dropped
		{"01-" + tid + "-" + sid + "-01x", false, 0},
		{"01-" + tid + "-" + sid + "-01-", true, 0x01},
		{"cc-" + tid + "-" + sid + "-09.", false, 0},
		{"00-00000000000000000000000000000000-" + sid + "-01", false, 0},
		{"00-" + tid + "-0000000000000000-01", false, 0},
		{"", false, 0},
		{"garbage", false, 0},
		{" 00-" + tid + "-" + sid + "-01", false, 0},
		{"00-" + tid + "-" + sid + "-01 ", false, 0},
		{"00_" + tid + "-" + sid + "-01", false, 0},
		{"0-0" + tid + "-" + sid + "-01", false, 0},
		{"00-" + tid + "-" + sid, false, 0},
		{"00-" + tid + "-" + sid + "-", false, 0},
		{"0g-" + tid + "-" + sid + "-01", false, 0},
		{"00-" + tid + "0-" + sid[1:] + "-01", false, 0},
	} {
		p, ok := parseTraceparent(c.in)
		if ok != c.ok {
			t.Errorf("parseTraceparent(%q) ok = %v, want %v", c.in, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if hex.EncodeToString(p.trace[:]) != tid || hex.EncodeToString(p.span[:]) != sid || p.flags != c.flags {
			t.Errorf("parseTraceparent(%q) = %x %x %02x, want %s %s %02x", c.in, p.trace, p.span, p.flags, tid, sid, c.flags)
		}
	}
}

// As the SDK's propagator parses and writes it again (same source as
// above): an invalid tracestate is dropped as a whole.
func TestParseTracestateAsTheSDKsPropagator(t *testing.T) {
	k := strings.Repeat
	var many, tooMany []string
	for i := range 33 {
		m := fmt.Sprintf("k%d=v", i)
		if i < 32 {
			many = append(many, m)
		}
		tooMany = append(tooMany, m)
	}
	for _, c := range []struct{ in, want string }{
		{"a=1,b=2", "a=1,b=2"},
		{"a=1, b=2", "a=1,b=2"},
		{"a=1 ,b=2", "a=1,b=2"},
		{"a=1,,b=2", "a=1,b=2"},
		{",a=1,", "a=1"},
		{"A=1", ""},
		{"a=1,a=2", ""},
		{"a", ""},
		{"a=", ""},
		{"a= 1", "a= 1"},
		{"a=1 ", "a=1"},
		{" a=1", "a=1"},
		{"a =1", ""},
		{"a\t=1", ""},
		{"\ta=1", "a=1"},
		{"t@sys=1", "t@sys=1"},
		{"1@sys=1", "1@sys=1"},
		{"t@1sys=1", ""},
		{"t@" + k("k", 14) + "=1", "t@" + k("k", 14) + "=1"},
		{"t@" + k("k", 15) + "=1", ""},
		{k("k", 256) + "=1", k("k", 256) + "=1"},
		{k("k", 257) + "=1", ""},
		{"a=b=c", ""},
		{"a=" + k("k", 256), "a=" + k("k", 256)},
		{"a=" + k("k", 257), ""},
		{"a=ü", ""},
		{"a=1,\t", ""},
		{"a=1, ", ""},
		{"a=x y", "a=x y"},
		{"a=,b=1", ""},
		{"a/b*c-d_e=1", "a/b*c-d_e=1"},
		{"a.b=1", ""},
		{"a=1;b", "a=1;b"},
		{strings.Join(many, ","), strings.Join(many, ",")},
		{strings.Join(tooMany, ","), ""},
		{"1a=1", ""},
		{"", ""},
	} {
		if got := parseTracestate(c.in); got != c.want {
			t.Errorf("parseTracestate(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestFormatTraceparent(t *testing.T) {
	p, _ := parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	for flags, want := range map[byte]string{0: "00", 1: "01", 2: "02", 3: "03", 0xff: "03"} {
		got := formatTraceparent(p.trace, p.span, flags)
		if got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-"+want {
			t.Errorf("flags %02x: %s", flags, got)
		}
	}
}

func TestNewIDsAreRandomAndValid(t *testing.T) {
	traces, spans := map[traceID]bool{}, map[spanID]bool{}
	for range 1000 {
		tid, sid := newTraceID(), newSpanID()
		if tid == (traceID{}) || sid == (spanID{}) || traces[tid] || spans[sid] {
			t.Fatalf("ids %x %x: zero, or seen before", tid, sid)
		}
		traces[tid], spans[sid] = true, true
	}
}
