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
		b := EncodeLeave(7, tt.grace)
		r, n, ok := parseRequest(b)
		if !ok || n != len(b) || r.op != opLeave || r.id != 7 || r.grace != tt.want {
			t.Errorf("grace %v arrived as %+v (used %d of %d, ok %v), want %v", tt.grace, r, n, len(b), ok, tt.want)
		}
		if _, n, ok := parseRequest(b[:len(b)-1]); !ok || n != 0 {
			t.Errorf("an order cut short was taken (used %d, ok %v)", n, ok)
		}
	}
}

// Requests and replies arrive whole, in order, from a stream that holds
// several or a part of one; what is no message is refused.
func TestMessagesSurviveTheStream(t *testing.T) {
	l := Launch{Path: "/bin/x", Args: []string{"x"}, Env: []string{"A=1"}, Dir: "/d"}
	stream := append(append(EncodeStart(1, l), EncodeCut(2)...), EncodeLeave(3, time.Second)...)
	var got []request
	for b := stream; len(b) > 0; {
		r, n, ok := parseRequest(b)
		if !ok || n == 0 {
			t.Fatalf("the stream's rest %q is no request", b)
		}
		for cut := range n { // any part short of the whole waits for more
			if r, n, ok := parseRequest(b[:cut]); !ok || n != 0 {
				t.Fatalf("a part of %d bytes was taken: %+v", cut, r)
			}
		}
		got = append(got, r)
		b = b[n:]
	}
	if len(got) != 3 || got[0].op != opStart || got[0].id != 1 || got[1].op != opCut || got[1].id != 2 || got[2].grace != time.Second {
		t.Fatalf("requests %+v", got)
	}
	if dl, ok := decode(got[0].launch[4:]); !ok || !reflect.DeepEqual(dl, l) {
		t.Errorf("the launch arrived as %#v", dl)
	}
	if _, _, ok := parseRequest([]byte("?")); ok {
		t.Error("a request of no known op was taken")
	}
	replies := append(append(encodeReply(opPid, 1, 4242), encodeError(2, "no such file")...), encodeReply(opExit, 1, 256)...)
	var rs []Reply
	for b := replies; len(b) > 0; {
		r, n, ok := ParseReply(b)
		if !ok || n == 0 {
			t.Fatalf("the stream's rest %q is no reply", b)
		}
		rs = append(rs, r)
		b = b[n:]
	}
	want := []Reply{{Op: opPid, ID: 1, Pid: 4242}, {Op: opError, ID: 2, Err: "no such file"}, {Op: opExit, ID: 1, Status: 256}}
	if !reflect.DeepEqual(rs, want) {
		t.Errorf("replies %+v, want %+v", rs, want)
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
