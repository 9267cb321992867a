package supervisor

import (
	"reflect"
	"testing"
	"time"
)

func TestLaunchSurvivesItsEncodingByteForByte(t *testing.T) {
	for _, l := range []Launch{
		{Path: "/bin/x", Args: []string{"x", "caf\xe9", ""}, Env: []string{"A=\xff\xfe", "B="}, Dir: "/tmp/d\x01"},
		{Path: "/bin/x", Args: []string{"x"}, Env: []string{}},
	} {
		b := l.Encode()
		r := reader{b: b[:4]}
		if n, _ := r.uint32(); int(n) != len(b)-4 {
			t.Fatalf("length prefix %d, want %d", n, len(b)-4)
		}
		got, ok := decode(b[4:])
		if !ok || !reflect.DeepEqual(got, l) {
			t.Errorf("decoded %#v (ok %v), want %#v", got, ok, l)
		}
	}
}

// The grace of an order to leave arrives to the millisecond; one below zero
// is none, and one past what the order holds is cut to that (49 days).
func TestLeaveOrderSurvivesItsEncoding(t *testing.T) {
	for _, tt := range []struct{ grace, want time.Duration }{
		{0, 0},
		{2 * time.Second, 2 * time.Second},
		{1500 * time.Microsecond, time.Millisecond},
		{-time.Second, 0},
		{2000 * time.Hour, (1<<32 - 1) * time.Millisecond},
	} {
		got, ok := decodeLeave(EncodeLeave(tt.grace))
		if !ok || got != tt.want {
			t.Errorf("grace %v arrived as %v (ok %v), want %v", tt.grace, got, ok, tt.want)
		}
	}
	if _, ok := decodeLeave(EncodeLeave(time.Second)[:leaveSize-1]); ok {
		t.Error("an order cut short was taken")
	}
}

// FuzzDecodeRejectsWhatEncodeDidNotMake: anything cut short, padded or
// with a count past its bytes is refused (the supervisor then reports an
// error), never a panic nor a huge allocation.
func FuzzDecodeRejectsWhatEncodeDidNotMake(f *testing.F) {
	good := Launch{Path: "/p", Args: []string{"a", "b"}, Env: []string{"K=V"}, Dir: "/d"}.Encode()[4:]
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(append(append([]byte{}, good...), 0))
	f.Add([]byte{2, 0, 0, 0, '/', 'p', 0, 0, 0, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, ok := decode(b)
		if ok && string(l.Encode()[4:]) != string(b) {
			t.Errorf("%q decoded to %#v, which encodes differently", b, l)
		}
	})
}
