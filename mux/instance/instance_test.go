package instance

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestASealedStateNamesItsHolderOnlyToInstancesOfItsConfig(t *testing.T) {
	a, b := New("team-token"), New("team-token")
	a.Advertise("http://10.0.0.11:8931/")
	state := a.NewState()
	if !strings.HasPrefix(state, Prefix) || state == a.NewState() {
		t.Fatalf("state %q: want mcp-mux's prefix, and a new one each time", state)
	}
	if h, err := a.Open(state); err != nil || !h.Here || h.URL != "http://10.0.0.11:8931" {
		t.Fatalf("the holder opening its own state: %+v %v", h, err)
	}
	if h, err := b.Open(state); err != nil || h.Here || h.URL != "http://10.0.0.11:8931" {
		t.Fatalf("a peer of the same config: %+v %v, want the holder's address", h, err)
	}
	for name, other := range map[string]*Seal{"another token": New("other-token"), "no token": New()} {
		if h, err := other.Open(state); err != ErrNotOurs {
			t.Errorf("%s: opened %+v %v, want ErrNotOurs", name, h, err)
		}
	}
	// Every byte counts: an agent cannot make a state name another address.
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(state, Prefix))
	for i := range raw {
		forged := append([]byte(nil), raw...)
		forged[i] ^= 0x20
		if _, err := b.Open(Prefix + base64.RawURLEncoding.EncodeToString(forged)); err != ErrNotOurs {
			t.Fatalf("byte %d changed: %v, want ErrNotOurs", i, err)
		}
	}
	for _, bad := range []string{"", Prefix, Prefix + "!!", "[]", state[:len(state)-4]} {
		if _, err := b.Open(bad); err != ErrNotOurs {
			t.Errorf("Open(%q): %v, want ErrNotOurs", bad, err)
		}
	}
}

func TestWithoutATokenAStateOpensOnlyWhereItWasMade(t *testing.T) {
	a, b := New(""), New()
	if a.Shared() || b.Shared() || !New("t").Shared() {
		t.Fatal("Shared: want true only with a token")
	}
	state := a.NewState()
	if h, err := a.Open(state); err != nil || !h.Here || h.URL != "" {
		t.Fatalf("own state: %+v %v", h, err)
	}
	if _, err := b.Open(state); err != ErrNotOurs {
		t.Fatalf("another tokenless instance opened it: %v", err)
	}
}
