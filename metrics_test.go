package main

import "testing"

func TestSameAddrFindsTheListenerThatHoldsThePort(t *testing.T) {
	for _, tc := range []struct {
		url, addr string
		same      bool
	}{
		{"http://127.0.0.1:9464/metrics", "127.0.0.1:9464", true},
		{"http://127.0.0.1:9464/metrics", "localhost:9464", true},
		{"http://[::]:9464/metrics", "127.0.0.1:9464", true},
		{"http://127.0.0.1:9464/metrics", ":9464", true},
		{"http://127.0.0.1:9465/metrics", "127.0.0.1:9464", false},
		{"http://192.0.2.1:9464/metrics", "127.0.0.1:9464", false},
	} {
		if got := sameAddr(tc.url, tc.addr); got != tc.same {
			t.Errorf("sameAddr(%q, %q) = %v, want %v", tc.url, tc.addr, got, tc.same)
		}
	}
}
