package subs

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// internalSizes exposes the sizes of the registry's internal maps so tests
// can prove that nothing leaks once every subscription is gone.
func internalSizes(r *Registry) (backends, sessions, n int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.backends) + len(r.lens), len(r.sessions), r.n
}

func assertEmpty(t *testing.T, r *Registry) {
	t.Helper()
	if b, s, n := internalSizes(r); b != 0 || s != 0 || n != 0 {
		t.Fatalf("registry not empty: %d backends, %d sessions, n=%d", b, s, n)
	}
}

// counter is a forward/unforward pair that counts calls.
type counter struct{ fwd, unfwd atomic.Int64 }

func (c *counter) forward() error { c.fwd.Add(1); return nil }
func (c *counter) unforward(string) error {
	c.unfwd.Add(1)
	return nil
}
func (c *counter) unforward2(string, string) error {
	c.unfwd.Add(1)
	return nil
}

func mustSubscribe(t *testing.T, r *Registry, session, backend, uri string, mode Mode, forward func() error) bool {
	t.Helper()
	added, err := r.Subscribe(session, backend, uri, mode, forward)
	if err != nil {
		t.Fatalf("Subscribe(%s, %s, %s): %v", session, backend, uri, err)
	}
	return added
}

func TestSubscribeIsIdempotent(t *testing.T) {
	r := New(0)
	var c counter
	if !mustSubscribe(t, r, "s1", "b", "file:///a", Forwarded, c.forward) {
		t.Fatal("first Subscribe: added = false")
	}
	before := r.Session("s1")
	if mustSubscribe(t, r, "s1", "b", "file:///a", Forwarded, c.forward) {
		t.Fatal("second Subscribe: added = true")
	}
	if got := r.Len(); got != 1 {
		t.Fatalf("Len = %d, want 1", got)
	}
	if got := c.fwd.Load(); got != 1 {
		t.Fatalf("forward called %d times, want 1", got)
	}
	if after := r.Session("s1"); !slices.Equal(before, after) {
		t.Fatalf("second Subscribe changed the record: %v -> %v", before, after)
	}
}

func TestSubscribeOverLimitReturnsLimitErrorAndRecordsNothing(t *testing.T) {
	const limit = 3
	r := New(limit)
	if r.Limit() != limit {
		t.Fatalf("Limit = %d", r.Limit())
	}
	for i := range limit {
		mustSubscribe(t, r, "s", "b", fmt.Sprintf("x://%d", i), LocalOnly, nil)
	}
	called := false
	added, err := r.Subscribe("s", "b", "x://over", Forwarded, func() error { called = true; return nil })
	if added {
		t.Fatal("added = true over the limit")
	}
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != limit {
		t.Fatalf("err = %v, want *LimitError{%d}", err, limit)
	}
	if !errors.Is(err, ErrLimit) {
		t.Fatal("errors.Is(err, ErrLimit) = false")
	}
	if want := "subscription limit reached: at most 3 per session"; err.Error() != want {
		t.Fatalf("message = %q, want %q", err.Error(), want)
	}
	if called {
		t.Fatal("forward called for a refused subscription")
	}
	if r.Len() != limit || r.Count("b", "x://over") != 0 {
		t.Fatalf("over-limit subscription recorded: Len=%d", r.Len())
	}
	// Other sessions have their own budget.
	mustSubscribe(t, r, "other", "b", "x://over", LocalOnly, nil)
}

func TestResubscribeHeldURIAtLimitSucceeds(t *testing.T) {
	r := New(2)
	mustSubscribe(t, r, "s", "b", "x://1", LocalOnly, nil)
	mustSubscribe(t, r, "s", "b", "x://2", LocalOnly, nil)
	added, err := r.Subscribe("s", "b", "x://2", LocalOnly, nil)
	if added || err != nil {
		t.Fatalf("re-subscribe at limit = (%v, %v), want (false, nil)", added, err)
	}
}

func TestForwardCalledOnceForTwoSessionsOnSameKey(t *testing.T) {
	r := New(0)
	var c counter
	mustSubscribe(t, r, "s1", "b", "x://k", Forwarded, c.forward)
	mustSubscribe(t, r, "s2", "b", "x://k", Forwarded, c.forward)
	if got := c.fwd.Load(); got != 1 {
		t.Fatalf("forward called %d times, want 1", got)
	}
	if got := r.Count("b", "x://k"); got != 2 {
		t.Fatalf("Count = %d, want 2", got)
	}
	// Same URI on another backend is another key.
	mustSubscribe(t, r, "s1", "b2", "x://k2", Forwarded, c.forward)
	if got := c.fwd.Load(); got != 2 {
		t.Fatalf("forward called %d times, want 2", got)
	}
}

func TestConcurrentSubscribesToSameKeyForwardOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(0)
		var calls atomic.Int64
		release := make(chan struct{})
		forward := func() error {
			calls.Add(1)
			<-release // keep the forward in flight while the others arrive
			return nil
		}
		const n = 20
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				mustSubscribe(t, r, fmt.Sprint("s", i), "b", "x://k", Forwarded, forward)
			})
		}
		synctest.Wait() // every Subscribe has arrived: in the forward, or waiting for it
		close(release)
		wg.Wait()
		if got := calls.Load(); got != 1 {
			t.Fatalf("forward called %d times, want 1", got)
		}
		if got := r.Count("b", "x://k"); got != n {
			t.Fatalf("Count = %d, want %d", got, n)
		}
	})
}

func TestForwardErrorRecordsNothingAndIsReturned(t *testing.T) {
	r := New(0)
	boom := errors.New("backend said no")
	added, err := r.Subscribe("s", "b", "x://k", Forwarded, func() error { return boom })
	if added || err != boom {
		t.Fatalf("Subscribe = (%v, %v), want (false, %v)", added, err, boom)
	}
	if r.Len() != 0 || r.Count("b", "x://k") != 0 || len(r.Session("s")) != 0 {
		t.Fatal("failed forward left a record")
	}
	assertEmpty(t, r)
	// A later attempt forwards again.
	var c counter
	mustSubscribe(t, r, "s", "b", "x://k", Forwarded, c.forward)
	if c.fwd.Load() != 1 {
		t.Fatal("retry did not forward")
	}
}

func TestForwardFailureLetsWaiterRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(0)
		started := make(chan struct{})
		release := make(chan struct{})
		boom := errors.New("boom")
		errc := make(chan error, 1)
		go func() {
			_, err := r.Subscribe("s1", "b", "x://k", Forwarded, func() error {
				close(started)
				<-release
				return boom
			})
			errc <- err
		}()
		<-started
		var second atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			mustSubscribe(t, r, "s2", "b", "x://k", Forwarded, func() error { second.Add(1); return nil })
		}()
		synctest.Wait() // the second Subscribe is blocked, waiting for the first
		if second.Load() != 0 {
			t.Fatal("second forward ran while the first was in flight")
		}
		close(release)
		if err := <-errc; err != boom {
			t.Fatalf("first Subscribe err = %v", err)
		}
		<-done
		if second.Load() != 1 {
			t.Fatalf("waiter forwarded %d times after failure, want 1", second.Load())
		}
		if got := r.Subscribers("b", "x://k"); !slices.Equal(got, []string{"s2"}) {
			t.Fatalf("Subscribers = %v", got)
		}
	})
}

func TestUnsubscribeByOneOfTwoHoldersDoesNotUnforward(t *testing.T) {
	r := New(0)
	var c counter
	mustSubscribe(t, r, "s1", "b", "x://k", Forwarded, c.forward)
	mustSubscribe(t, r, "s2", "b", "x://k", Forwarded, c.forward)
	removed, err := r.Unsubscribe("s1", "x://k", c.unforward)
	if !removed || err != nil {
		t.Fatalf("Unsubscribe = (%v, %v)", removed, err)
	}
	if c.unfwd.Load() != 0 {
		t.Fatal("unforward called while another session holds the key")
	}
	if got := r.Count("b", "x://k"); got != 1 {
		t.Fatalf("Count = %d, want 1", got)
	}
}

func TestUnsubscribeByLastHolderUnforwardsOnce(t *testing.T) {
	r := New(0)
	var c counter
	var gotBackend string
	unforward := func(b string) error { gotBackend = b; return c.unforward(b) }
	mustSubscribe(t, r, "s1", "b", "x://k", Forwarded, c.forward)
	mustSubscribe(t, r, "s2", "b", "x://k", Forwarded, c.forward)
	r.Unsubscribe("s1", "x://k", unforward)
	r.Unsubscribe("s2", "x://k", unforward)
	if c.unfwd.Load() != 1 || gotBackend != "b" {
		t.Fatalf("unforward calls = %d (backend %q), want 1 for b", c.unfwd.Load(), gotBackend)
	}
	// A second unsubscribe of the same URI is a no-op.
	removed, _ := r.Unsubscribe("s2", "x://k", unforward)
	if removed || c.unfwd.Load() != 1 {
		t.Fatal("repeated Unsubscribe removed or unforwarded again")
	}
	assertEmpty(t, r)
}

func TestManyHoldersOnOneKeyUnforwardOnlyAfterLast(t *testing.T) {
	r := New(0)
	var c counter
	const n = 3*smallHolders + 1 // past the slice-to-map switch
	var want []string
	for i := range n {
		s := fmt.Sprintf("s%02d", i)
		want = append(want, s)
		mustSubscribe(t, r, s, "b", "x://k", Forwarded, c.forward)
	}
	if got := r.Subscribers("b", "x://k/child"); !slices.Equal(got, want) {
		t.Fatalf("Subscribers = %v, want %v", got, want)
	}
	// Remove from the middle outwards so both swap-remove and map delete run.
	for len(want) > 0 {
		i := len(want) / 2
		if removed, _ := r.Unsubscribe(want[i], "x://k", c.unforward); !removed {
			t.Fatalf("Unsubscribe(%s) not removed", want[i])
		}
		want = slices.Delete(want, i, i+1)
		if got := r.Subscribers("b", "x://k"); !slices.Equal(got, want) {
			t.Fatalf("Subscribers = %v, want %v", got, want)
		}
		if got := r.Count("b", "x://k"); got != len(want) {
			t.Fatalf("Count = %d, want %d", got, len(want))
		}
		wantUn := int64(0)
		if len(want) == 0 {
			wantUn = 1
		}
		if c.unfwd.Load() != wantUn {
			t.Fatalf("unforward calls = %d with %d holders left", c.unfwd.Load(), len(want))
		}
	}
	if c.fwd.Load() != 1 {
		t.Fatalf("forward calls = %d, want 1", c.fwd.Load())
	}
	assertEmpty(t, r)
}

func TestUnsubscribeRemovesRecordEvenIfUnforwardFails(t *testing.T) {
	r := New(0)
	boom := errors.New("gone")
	mustSubscribe(t, r, "s", "b", "x://k", Forwarded, nil)
	removed, err := r.Unsubscribe("s", "x://k", func(string) error { return boom })
	if !removed || err != boom {
		t.Fatalf("Unsubscribe = (%v, %v), want (true, %v)", removed, err, boom)
	}
	assertEmpty(t, r)
}

func TestLocalOnlyNeverCallsForwardOrUnforward(t *testing.T) {
	r := New(0)
	fail := func() error { t.Error("forward called for LocalOnly"); return nil }
	failUn := func(string) error { t.Error("unforward called for LocalOnly"); return nil }
	failEnd := func(string, string) error { t.Error("unforward called for LocalOnly"); return nil }
	mustSubscribe(t, r, "s1", "b", "x://k", LocalOnly, fail)
	mustSubscribe(t, r, "s2", "b", "x://k", LocalOnly, fail)
	mustSubscribe(t, r, "s2", "b", "x://other", LocalOnly, fail)
	if got := r.ForwardedURIs("b"); len(got) != 0 {
		t.Fatalf("ForwardedURIs = %v, want none", got)
	}
	r.Unsubscribe("s1", "x://k", failUn)
	if _, err := r.EndSession("s2", failEnd); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, r)
}

func TestForwardedAfterLocalOnlyOnSameKeyForwards(t *testing.T) {
	r := New(0)
	var c counter
	mustSubscribe(t, r, "s1", "b", "x://k", LocalOnly, nil)
	mustSubscribe(t, r, "s2", "b", "x://k", Forwarded, c.forward)
	if c.fwd.Load() != 1 {
		t.Fatalf("forward calls = %d, want 1", c.fwd.Load())
	}
	if got := r.ForwardedURIs("b"); !slices.Equal(got, []string{"x://k"}) {
		t.Fatalf("ForwardedURIs = %v", got)
	}
	r.Unsubscribe("s2", "x://k", c.unforward)
	if c.unfwd.Load() != 1 {
		t.Fatal("last Forwarded holder left but no unforward")
	}
	if r.Count("b", "x://k") != 1 {
		t.Fatal("LocalOnly holder lost")
	}
}

func TestUnsubscribeUnknownReturnsFalseNil(t *testing.T) {
	r := New(0)
	called := false
	un := func(string) error { called = true; return nil }
	if removed, err := r.Unsubscribe("nobody", "x://k", un); removed || err != nil {
		t.Fatalf("unknown session: (%v, %v)", removed, err)
	}
	mustSubscribe(t, r, "s", "b", "x://k", Forwarded, nil)
	if removed, err := r.Unsubscribe("s", "x://other", un); removed || err != nil {
		t.Fatalf("unknown uri: (%v, %v)", removed, err)
	}
	if called || r.Len() != 1 {
		t.Fatal("Unsubscribe of unknown URI had side effects")
	}
}

func TestSubscribersMatchesSubResources(t *testing.T) {
	r := New(0)
	mustSubscribe(t, r, "p", "b", "file:///p", LocalOnly, nil)
	mustSubscribe(t, r, "exact", "b", "file:///p/a/b", LocalOnly, nil)
	mustSubscribe(t, r, "mid", "b", "file:///p/a", LocalOnly, nil)
	mustSubscribe(t, r, "slash", "b", "x://a/", LocalOnly, nil)
	mustSubscribe(t, r, "noslash", "b", "x://a", LocalOnly, nil)

	cases := []struct {
		uri  string
		want []string
	}{
		{"file:///p/a/b", []string{"exact", "mid", "p"}},
		{"file:///p/a", []string{"mid", "p"}},
		{"file:///p", []string{"p"}},
		{"file:///pa", nil}, // not a '/' boundary
		{"file:///p/", nil}, // rest would be empty
		{"file:///p/a/bc", []string{"mid", "p"}},
		{"x://a/b", []string{"noslash", "slash"}}, // "x://a/" + "b" and "x://a" + "/" + "b"
		{"x://a/", []string{"slash"}},
		{"x://ab", nil},
	}
	for _, c := range cases {
		if got := r.Subscribers("b", c.uri); !slices.Equal(got, c.want) {
			t.Errorf("Subscribers(%q) = %v, want %v", c.uri, got, c.want)
		}
	}
}

func TestSubscribersDeduplicatesAndSorts(t *testing.T) {
	r := New(0)
	for _, s := range []string{"z", "a", "m"} {
		mustSubscribe(t, r, s, "b", "x://d", LocalOnly, nil)
		mustSubscribe(t, r, s, "b", "x://d/f", LocalOnly, nil)
	}
	if got := r.Subscribers("b", "x://d/f"); !slices.Equal(got, []string{"a", "m", "z"}) {
		t.Fatalf("Subscribers = %v", got)
	}
}

func TestSubscribersIgnoresOtherBackends(t *testing.T) {
	r := New(0)
	mustSubscribe(t, r, "s1", "b1", "x://k", LocalOnly, nil)
	mustSubscribe(t, r, "s2", "b2", "x://k", LocalOnly, nil)
	mustSubscribe(t, r, "s3", "b2", "x://", LocalOnly, nil)
	if got := r.Subscribers("b1", "x://k"); !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("Subscribers(b1) = %v", got)
	}
	if got := r.Subscribers("b1", "x://k/sub"); !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("Subscribers(b1, sub) = %v", got)
	}
	if got := r.Subscribers("b3", "x://k"); len(got) != 0 {
		t.Fatalf("Subscribers(unknown backend) = %v", got)
	}
}

func TestEndSessionUnforwardsOnlyZeroCountKeysAndKeepsOtherSessions(t *testing.T) {
	r := New(0)
	var c counter
	mustSubscribe(t, r, "gone", "b", "x://shared", Forwarded, c.forward)
	mustSubscribe(t, r, "gone", "b", "x://alone", Forwarded, c.forward)
	mustSubscribe(t, r, "gone", "b2", "x://alone2", Forwarded, c.forward)
	mustSubscribe(t, r, "gone", "b", "x://local", LocalOnly, nil)
	mustSubscribe(t, r, "stay", "b", "x://shared", Forwarded, c.forward)

	var mu sync.Mutex
	var unforwarded []string
	boom := errors.New("b2 down")
	removed, err := r.EndSession("gone", func(backend, uri string) error {
		mu.Lock()
		unforwarded = append(unforwarded, backend+" "+uri)
		mu.Unlock()
		if backend == "b2" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want joined %v", err, boom)
	}
	slices.Sort(unforwarded)
	if want := []string{"b x://alone", "b2 x://alone2"}; !slices.Equal(unforwarded, want) {
		t.Fatalf("unforwarded %v, want %v", unforwarded, want)
	}
	var uris []string
	for _, s := range removed {
		if s.Session != "gone" {
			t.Fatalf("removed sub of another session: %+v", s)
		}
		uris = append(uris, s.URI)
	}
	if want := []string{"x://alone", "x://alone2", "x://local", "x://shared"}; !slices.Equal(uris, want) {
		t.Fatalf("removed %v, want %v", uris, want)
	}
	if got := r.Session("stay"); len(got) != 1 || got[0].URI != "x://shared" {
		t.Fatalf("other session changed: %v", got)
	}
	if r.Len() != 1 || len(r.Session("gone")) != 0 {
		t.Fatalf("Len = %d after EndSession", r.Len())
	}
	if got := r.ForwardedURIs("b"); !slices.Equal(got, []string{"x://shared"}) {
		t.Fatalf("ForwardedURIs = %v", got)
	}
	if subs, err := r.EndSession("gone", nil); subs != nil || err != nil {
		t.Fatalf("second EndSession = (%v, %v)", subs, err)
	}
}

func TestResubscribeDuringUnforwardForwardsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(0)
		mustSubscribe(t, r, "s1", "b", "x://k", Forwarded, nil)
		inUnforward := make(chan struct{})
		release := make(chan struct{})
		var forwards atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Unsubscribe("s1", "x://k", func(string) error {
				close(inUnforward)
				<-release
				return nil
			})
		}()
		<-inUnforward
		subDone := make(chan struct{})
		go func() {
			defer close(subDone)
			mustSubscribe(t, r, "s2", "b", "x://k", Forwarded, func() error { forwards.Add(1); return nil })
		}()
		synctest.Wait() // the re-subscribe is blocked, waiting for the unforward
		if forwards.Load() != 0 {
			t.Fatal("forward ran concurrently with unforward")
		}
		close(release)
		<-done
		<-subDone
		if forwards.Load() != 1 {
			t.Fatalf("re-subscribe forwarded %d times, want 1", forwards.Load())
		}
		if got := r.ForwardedURIs("b"); !slices.Equal(got, []string{"x://k"}) {
			t.Fatalf("ForwardedURIs = %v", got)
		}
	})
}

func TestQueriesAreSorted(t *testing.T) {
	r := New(0)
	mustSubscribe(t, r, "s2", "b", "x://b", Forwarded, nil)
	mustSubscribe(t, r, "s1", "b", "x://b", Forwarded, nil)
	mustSubscribe(t, r, "s1", "b", "x://a", LocalOnly, nil)
	mustSubscribe(t, r, "s1", "c", "x://c", Forwarded, nil)

	key := func(subs []Sub) []string {
		var out []string
		for _, s := range subs {
			out = append(out, s.Session+" "+s.Backend+" "+s.URI+" "+s.Mode.String())
		}
		return out
	}
	if got, want := key(r.Session("s1")), []string{"s1 b x://a local-only", "s1 b x://b forwarded", "s1 c x://c forwarded"}; !slices.Equal(got, want) {
		t.Errorf("Session = %v", got)
	}
	if got, want := key(r.Backend("b")), []string{"s1 b x://a local-only", "s1 b x://b forwarded", "s2 b x://b forwarded"}; !slices.Equal(got, want) {
		t.Errorf("Backend = %v", got)
	}
	if got, want := key(r.All()), []string{"s1 b x://a local-only", "s1 b x://b forwarded", "s1 c x://c forwarded", "s2 b x://b forwarded"}; !slices.Equal(got, want) {
		t.Errorf("All = %v", got)
	}
	if got := r.ForwardedURIs("b"); !slices.Equal(got, []string{"x://b"}) {
		t.Errorf("ForwardedURIs = %v", got)
	}
	if r.Len() != 4 || r.Count("b", "x://b") != 2 || r.Count("b", "x://nope") != 0 {
		t.Errorf("Len=%d Count=%d", r.Len(), r.Count("b", "x://b"))
	}
	for _, s := range r.All() {
		if s.Since.IsZero() {
			t.Errorf("Since not set: %+v", s)
		}
	}
}

func TestSubJSONUsesModeNames(t *testing.T) {
	in := Sub{Session: "s", Backend: "b", URI: "x://k", Since: time.Unix(1, 0).UTC(), Mode: LocalOnly}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"session":"s","backend":"b","uri":"x://k","since":"1970-01-01T00:00:01Z","mode":"local-only"}`; string(data) != want {
		t.Fatalf("json = %s, want %s", data, want)
	}
	var out Sub
	if err := json.Unmarshal(data, &out); err != nil || out != in {
		t.Fatalf("round trip = %+v, %v", out, err)
	}
	if Forwarded.String() != "forwarded" {
		t.Fatal(Forwarded.String())
	}
}

func TestPanickingForwardDoesNotWedgeKey(t *testing.T) {
	r := New(0)
	func() {
		defer func() { recover() }()
		r.Subscribe("s", "b", "x://k", Forwarded, func() error { panic("boom") })
	}()
	assertEmpty(t, r)
	mustSubscribe(t, r, "s", "b", "x://k", Forwarded, nil)
}

func TestConcurrentStressKeepsForwardsBalanced(t *testing.T) {
	r := New(0)
	const (
		sessions = 12 // more than smallHolders, so keys switch to maps
		uris     = 6
		backends = 2
		workers  = 16
		ops      = 3000
	)
	type key struct{ backend, uri string }
	var mu sync.Mutex
	net := map[key]int{} // forwards - unforwards per key
	bump := func(k key, d int) {
		// Widen the window in which forward/unforward run unlocked, so that
		// overlapping calls for one key would actually be observed. Pacing,
		// not a wait: shorter, overlaps would be caught less often, but
		// nothing the test checks is skipped.
		time.Sleep(20 * time.Microsecond)
		mu.Lock()
		net[k] += d
		if net[k] < 0 || net[k] > 1 {
			t.Errorf("key %v forwarded %d times at once", k, net[k])
		}
		mu.Unlock()
	}
	// Each URI always routes to the same backend, as the mux does.
	backendOf := func(u int) string { return fmt.Sprint("b", u%backends) }
	uriOf := func(u int) string { return fmt.Sprintf("x://r/%d", u) }

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewSource(int64(w)))
			for range ops {
				s := fmt.Sprint("s", rng.Intn(sessions))
				u := rng.Intn(uris)
				b, uri := backendOf(u), uriOf(u)
				k := key{b, uri}
				switch rng.Intn(10) {
				case 0, 1, 2, 3:
					var fail bool = rng.Intn(10) == 0
					r.Subscribe(s, b, uri, Forwarded, func() error {
						if fail {
							return errors.New("flaky")
						}
						bump(k, 1)
						return nil
					})
				case 4:
					r.Subscribe(s, b, uri, LocalOnly, func() error {
						t.Error("forward for LocalOnly")
						return nil
					})
				case 5, 6, 7:
					r.Unsubscribe(s, uri, func(backend string) error {
						if backend != b {
							t.Errorf("unforward backend %s, want %s", backend, b)
						}
						bump(k, -1)
						return nil
					})
				case 8:
					r.EndSession(s, func(backend, uri string) error {
						bump(key{backend, uri}, -1)
						return nil
					})
				case 9:
					r.Subscribers(b, uri+"/child")
					r.Session(s)
					r.Backend(b)
				}
			}
		})
	}
	wg.Wait()

	check := func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for u := range uris {
			b, uri := backendOf(u), uriOf(u)
			held := slices.Contains(r.ForwardedURIs(b), uri)
			want := 0
			if held {
				want = 1
			}
			if got := net[key{b, uri}]; got != want {
				t.Errorf("key %s %s: forwards-unforwards = %d, want %d (held=%v)", b, uri, got, want, held)
			}
		}
	}
	check()
	n := 0
	for _, s := range r.All() {
		if s.Mode == Forwarded && !slices.Contains(r.ForwardedURIs(s.Backend), s.URI) {
			t.Errorf("forwarded sub %+v missing from ForwardedURIs", s)
		}
		n++
	}
	if n != r.Len() {
		t.Errorf("All has %d subs, Len = %d", n, r.Len())
	}

	// Drain everything, half by Unsubscribe and half by EndSession.
	for i := range sessions {
		s := fmt.Sprint("s", i)
		if i%2 == 0 {
			r.EndSession(s, func(backend, uri string) error { bump(key{backend, uri}, -1); return nil })
			continue
		}
		for _, sub := range r.Session(s) {
			k := key{sub.Backend, sub.URI}
			r.Unsubscribe(s, sub.URI, func(string) error { bump(k, -1); return nil })
		}
	}
	check()
	assertEmpty(t, r)
}

func TestMapsEmptyAfterEverythingRemoved(t *testing.T) {
	r := New(5)
	var c counter
	for i := range 4 {
		for j := range 5 {
			mode := Forwarded
			if j%2 == 1 {
				mode = LocalOnly
			}
			mustSubscribe(t, r, fmt.Sprint("s", i), fmt.Sprint("b", j%2), fmt.Sprintf("x://%d/%d", j, i%2), mode, c.forward)
		}
	}
	// A failed forward must not leave anything behind either.
	r.Subscribe("s9", "b9", "x://fail", Forwarded, func() error { return errors.New("no") })
	r.Unsubscribe("s0", "x://0/0", c.unforward)
	r.Unsubscribe("s1", "x://1/1", c.unforward)
	for i := range 4 {
		if i%2 == 0 {
			r.EndSession(fmt.Sprint("s", i), c.unforward2)
		} else {
			for _, s := range r.Session(fmt.Sprint("s", i)) {
				r.Unsubscribe(s.Session, s.URI, c.unforward)
			}
		}
	}
	assertEmpty(t, r)
	if c.fwd.Load() != c.unfwd.Load() {
		t.Fatalf("forwards %d != unforwards %d", c.fwd.Load(), c.unfwd.Load())
	}
}

func TestUnsubscribeWaitsForPendingSubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(0)
		started := make(chan struct{})
		release := make(chan struct{})
		go func() {
			mustSubscribe(t, r, "s", "b", "x://k", Forwarded, func() error {
				close(started)
				<-release
				return nil
			})
		}()
		<-started
		var removed bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			removed, _ = r.Unsubscribe("s", "x://k", nil)
		}()
		synctest.Wait() // the Unsubscribe is blocked, waiting for the Subscribe
		close(release)
		<-done
		if !removed {
			t.Fatal("Unsubscribe during a pending Subscribe did not remove it")
		}
		assertEmpty(t, r)
	})
}

func TestPendingSubscribesCountAgainstLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(1)
		started := make(chan struct{})
		release := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			mustSubscribe(t, r, "s", "b", "x://1", Forwarded, func() error {
				close(started)
				<-release
				return nil
			})
		}()
		<-started
		if _, err := r.Subscribe("s", "b", "x://2", LocalOnly, nil); !errors.Is(err, ErrLimit) {
			t.Fatalf("err = %v, want ErrLimit while another subscribe is pending", err)
		}
		// A duplicate of the pending URI waits and then reports "already held".
		dup := make(chan error, 1)
		go func() {
			added, err := r.Subscribe("s", "b", "x://1", Forwarded, nil)
			if added {
				err = errors.New("duplicate added")
			}
			dup <- err
		}()
		synctest.Wait() // the duplicate is blocked, waiting for the pending one
		close(release)
		<-done
		if err := <-dup; err != nil {
			t.Fatal(err)
		}
		if r.Len() != 1 {
			t.Fatalf("Len = %d", r.Len())
		}
	})
}

// A URI of a subscribed prefix followed by a million '/' cost 58 s under the
// registry lock when every prefix was hashed (quadratic); only the prefixes
// with a held key's length are looked up now. The bound is a hang guard, not
// a speed target: linear matching takes milliseconds.
func TestSubscribersIsLinearInURILength(t *testing.T) {
	r := New(0)
	held := []string{"file:///dir", "file:///dir/"}
	for i := range 20 { // more than a small map scans without hashing
		held = append(held, fmt.Sprintf("x://other/%d", i))
	}
	for _, u := range held {
		if _, err := r.Subscribe("s1", "b", u, LocalOnly, nil); err != nil {
			t.Fatal(err)
		}
	}
	uri := "file:///dir/" + strings.Repeat("/", 1<<20)
	start := time.Now()
	got := r.Subscribers("b", uri)
	d := time.Since(start)
	t.Logf("Subscribers for a URI of %d bytes under a held prefix: %v", len(uri), d)
	if d > 2*time.Second {
		t.Errorf("Subscribers took %v for a %d-byte URI", d, len(uri))
	}
	if !slices.Equal(got, []string{"s1"}) {
		t.Errorf("Subscribers = %v, want [s1]", got)
	}
	// The length index shrinks back with the keys.
	r.EndSession("s1", nil)
	assertEmpty(t, r)
}
