package mux

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// updates records the notifications/resources/updated a client received.
type updates struct {
	mu   sync.Mutex
	got  []*mcp.ResourceUpdatedNotificationParams
	seen chan struct{}
}

func newUpdates() *updates { return &updates{seen: make(chan struct{}, 100)} }

func (u *updates) opts() *mcp.ClientOptions {
	return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
		u.mu.Lock()
		u.got = append(u.got, r.Params)
		u.mu.Unlock()
		u.seen <- struct{}{}
	}}
}

func (u *updates) uris() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, p := range u.got {
		out = append(out, p.URI)
	}
	return out
}

func (u *updates) count(uri string) int {
	n := 0
	for _, x := range u.uris() {
		if x == uri {
			n++
		}
	}
	return n
}

// waitFor waits until uri was received n times in all.
func (u *updates) waitFor(t testing.TB, uri string, n int) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, "resources/updated for "+uri, func() bool { return u.count(uri) >= n })
}

// quiet asserts nothing more arrives for a while: notifications are
// asynchronous, so absence can only be shown by waiting.
func (u *updates) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	before := len(u.uris())
	testkit.Quiet(d) // see above: absence is shown only by waiting
	if after := u.uris(); len(after) != before {
		t.Errorf("unexpected updates: %v", after[before:])
	}
}

func subscribe(t testing.TB, cs *mcp.ClientSession, uri string) {
	t.Helper()
	if err := cs.Subscribe(testkit.CtxT(t), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
}

func unsubscribe(t testing.TB, cs *mcp.ClientSession, uri string) {
	t.Helper()
	if err := cs.Unsubscribe(testkit.CtxT(t), &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatalf("unsubscribe %s: %v", uri, err)
	}
}

const res1 = "fixture://notes/res/1"

func TestSubscribeForwardsOnceToSubscribingBackend(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs := connect(t, m, nil)
	subscribe(t, cs, res1)
	subscribe(t, cs, res1) // idempotent
	if got := fixtureStats(t, cs, "notes__stats").Subscribe[res1]; got != 1 {
		t.Errorf("backend received %d subscribes, want 1", got)
	}
	if n := len(m.subs.Session("s1")); n != 1 {
		t.Errorf("registry holds %d subscriptions for the session, want 1", n)
	}
}

func TestTwoSessionsShareOneBackendSubscription(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	u1, u2 := newUpdates(), newUpdates()
	cs1 := connect(t, m, u1.opts())
	cs2 := connect(t, m, u2.opts())

	subscribe(t, cs1, res1)
	subscribe(t, cs2, res1)
	if got := fixtureStats(t, cs1, "notes__stats").Subscribe[res1]; got != 1 {
		t.Fatalf("backend received %d subscribes for two sessions, want 1", got)
	}
	callText(t, cs1, "notes__update", map[string]any{"uri": res1})
	u1.waitFor(t, res1, 1)
	u2.waitFor(t, res1, 1)

	unsubscribe(t, cs1, res1)
	if got := fixtureStats(t, cs1, "notes__stats").Unsubscribe[res1]; got != 0 {
		t.Errorf("backend received %d unsubscribes while a session still holds the URI", got)
	}
	callText(t, cs1, "notes__update", map[string]any{"uri": res1})
	u2.waitFor(t, res1, 2)
	u1.quiet(t, 200*time.Millisecond)
	if n := u1.count(res1); n != 1 {
		t.Errorf("unsubscribed session got %d updates, want 1 (from before)", n)
	}

	unsubscribe(t, cs2, res1)
	if got := fixtureStats(t, cs1, "notes__stats").Unsubscribe[res1]; got != 1 {
		t.Errorf("backend received %d unsubscribes after the last session let go, want exactly 1", got)
	}
}

func TestUpdateWithoutSubscriberReachesNoSession(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	u1, u2 := newUpdates(), newUpdates()
	cs1 := connect(t, m, u1.opts())
	connect(t, m, u2.opts())
	subscribe(t, cs1, "fixture://notes/res/2")
	callText(t, cs1, "notes__update", map[string]any{"uri": res1})
	// The update for res/2 that follows proves the pipeline ran past res/1.
	callText(t, cs1, "notes__update", map[string]any{"uri": "fixture://notes/res/2"})
	u1.waitFor(t, "fixture://notes/res/2", 1)
	u2.quiet(t, 200*time.Millisecond)
	if u1.count(res1) != 0 || len(u2.uris()) != 0 {
		t.Errorf("update for an unsubscribed URI was delivered: s1 %v, s2 %v", u1.uris(), u2.uris())
	}
}

func TestSubResourceUpdateReachesParentSubscriber(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	u := newUpdates()
	cs := connect(t, m, u.opts())
	subscribe(t, cs, res1)
	child := res1 + "/section/2"
	callText(t, cs, "notes__update", map[string]any{"uri": child})
	u.waitFor(t, child, 1)
	// A sibling whose name merely starts the same is not a sub-resource.
	callText(t, cs, "notes__update", map[string]any{"uri": res1 + "0"})
	u.quiet(t, 200*time.Millisecond)
	if u.count(res1+"0") != 0 {
		t.Error("update for res/10 reached the subscriber of res/1")
	}
}

func TestUpdatePassesParamsAndMetaThrough(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	u := newUpdates()
	cs := connect(t, m, u.opts())
	subscribe(t, cs, res1)
	callText(t, cs, "notes__update", map[string]any{"uri": res1})
	u.waitFor(t, res1, 1)
	u.mu.Lock()
	meta := u.got[0].Meta
	u.mu.Unlock()
	if meta["fixture"] != "notes" {
		t.Errorf("_meta = %v, want the backend's own", meta)
	}
}

func TestSubscribeUnknownURIIsInvalidParams(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs := connect(t, m, nil)
	err := cs.Subscribe(testkit.CtxT(t), &mcp.SubscribeParams{URI: "nowhere://x"})
	je := rpcCode(t, err)
	if je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, "nowhere://x") {
		t.Errorf("got %d %q, want -32602 naming the URI", je.Code, je.Message)
	}
	if m.subs.Len() != 0 {
		t.Errorf("a failed subscribe was recorded")
	}
}

func TestSubscribeTemplateURIRoutesToTemplateBackend(t *testing.T) {
	m := startMux(t, fixture(t, "notes"), fixture(t, "tasks"))
	cs := connect(t, m, nil)
	uri := "fixture://tasks/items/7"
	subscribe(t, cs, uri)
	if got := fixtureStats(t, cs, "tasks__stats").Subscribe[uri]; got != 1 {
		t.Errorf("tasks received %d subscribes, want 1", got)
	}
	if got := fixtureStats(t, cs, "notes__stats").Subscribe[uri]; got != 0 {
		t.Errorf("notes received %d subscribes for tasks' URI", got)
	}
	if s := m.subs.All(); len(s) != 1 || s[0].Backend != "tasks" {
		t.Errorf("registry: %+v", s)
	}
}

func TestSubscriptionLimit(t *testing.T) {
	cfg := testConfig(fixture(t, "notes", "-resources", "5"))
	cfg.Mux.MaxSubscriptions = 3
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)
	for i := 1; i <= 3; i++ {
		subscribe(t, cs, "fixture://notes/res/"+string(rune('0'+i)))
	}
	err := cs.Subscribe(testkit.CtxT(t), &mcp.SubscribeParams{URI: "fixture://notes/res/4"})
	je := rpcCode(t, err)
	if je.Code != CodeLimitExceeded || !strings.Contains(je.Message, "3") {
		t.Errorf("4th subscribe: %d %q, want -32029 stating the limit 3", je.Code, je.Message)
	}
	if n := m.subs.Len(); n != 3 {
		t.Errorf("registry holds %d, want 3 (the refused one not recorded)", n)
	}
	if got := fixtureStats(t, cs, "notes__stats").Subscribe["fixture://notes/res/4"]; got != 0 {
		t.Errorf("the refused subscribe reached the backend")
	}
	subscribe(t, cs, "fixture://notes/res/2") // already held: fine at the limit
}

func TestLocalOnlySubscriptionForBackendWithoutSubscribe(t *testing.T) {
	m := startMux(t, fixture(t, "plain", "-subscribe=false"))
	u := newUpdates()
	cs := connect(t, m, u.opts())
	uri := "fixture://plain/res/1"
	subscribe(t, cs, uri) // the backend answers -32601 to subscribe: success proves it was not sent one
	all := m.subs.All()
	if len(all) != 1 || all[0].Mode.String() != "local-only" {
		t.Fatalf("registry = %+v, want one local-only", all)
	}
	if got := fixtureStats(t, cs, "plain__stats").Subscribe; len(got) != 0 {
		t.Errorf("backend without subscribe support received %v", got)
	}
	// Updates it sends anyway are delivered.
	callText(t, cs, "plain__update", map[string]any{"uri": uri})
	u.waitFor(t, uri, 1)
	unsubscribe(t, cs, uri)
	if got := fixtureStats(t, cs, "plain__stats").Unsubscribe; len(got) != 0 {
		t.Errorf("backend received unsubscribe for a local-only subscription: %v", got)
	}
}

func TestPollingLocalOnlySubscription(t *testing.T) {
	spec := fixture(t, "plain", "-subscribe=false")
	spec.PollInterval.Duration = 200 * time.Millisecond
	m := startMux(t, spec)
	u := newUpdates()
	cs := connect(t, m, u.opts())
	uri := "fixture://plain/res/1"
	subscribe(t, cs, uri)

	u.quiet(t, 500*time.Millisecond) // unchanged: no update
	changed := time.Now()
	callText(t, cs, "plain__set_content", map[string]any{"uri": uri, "text": "new"})
	u.waitFor(t, uri, 1)
	t.Logf("polled change delivered after %v (interval 200ms)", time.Since(changed))
	// About one interval on a quiet machine (its speed is the benchmark's
	// business); 15 intervals means it is not polling at that interval.
	if d := time.Since(changed); d > 15*spec.PollInterval.Duration {
		t.Errorf("change noticed after %v, want about one interval (%v)", d, spec.PollInterval.Duration)
	}
	u.quiet(t, 500*time.Millisecond)
	if n := u.count(uri); n != 1 {
		t.Errorf("one change gave %d updates, want 1", n)
	}
	// The subscription ends: polling stops (no more reads change anything,
	// and a change is no longer reported).
	unsubscribe(t, cs, uri)
	callText(t, cs, "plain__set_content", map[string]any{"uri": uri, "text": "newer"})
	u.quiet(t, 500*time.Millisecond)
}

func TestUnsubscribeNotHeldSucceeds(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	cs := connect(t, m, nil)
	unsubscribe(t, cs, "fixture://notes/res/3")
	unsubscribe(t, cs, "nowhere://at/all")
	if got := fixtureStats(t, cs, "notes__stats").Unsubscribe; len(got) != 0 {
		t.Errorf("backend received %v", got)
	}
}

func TestSessionEndUnsubscribesAtBackend(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	keeper := connect(t, m, nil)
	leaver := connect(t, m, nil)
	subscribe(t, leaver, res1)
	subscribe(t, leaver, "fixture://notes/res/2")
	subscribe(t, keeper, "fixture://notes/res/2")
	leaver.Close()
	testkit.Eventually(t, 5*time.Second, "the session's subscriptions to go", func() bool { return m.subs.Len() == 1 })
	// The records go first, the unsubscribe to the backend follows.
	testkit.Eventually(t, 5*time.Second, "res/1 (held by the leaver only) to be unsubscribed", func() bool {
		return fixtureStats(t, keeper, "notes__stats").Unsubscribe[res1] == 1
	})
	st := fixtureStats(t, keeper, "notes__stats")
	if st.Unsubscribe["fixture://notes/res/2"] != 0 {
		t.Errorf("res/2 (still held by the other session) was unsubscribed")
	}
}

func TestSubscriptionsResourceReflectsAndNotifies(t *testing.T) {
	m := startMux(t, fixture(t, "notes"), fixture(t, "plain", "-subscribe=false"))
	u := newUpdates()
	cs := connect(t, m, u.opts())
	subscribe(t, cs, uriSubscriptions)

	read := func() []map[string]any {
		res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: uriSubscriptions})
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Subscriptions []map[string]any `json:"subscriptions"`
		}
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &v); err != nil {
			t.Fatal(err)
		}
		return v.Subscriptions
	}
	subscribe(t, cs, res1)
	u.waitFor(t, uriSubscriptions, 1)
	subscribe(t, cs, "fixture://plain/res/1")
	u.waitFor(t, uriSubscriptions, 2)

	modes := map[string]string{}
	for _, s := range read() {
		modes[s["uri"].(string)] = s["backend"].(string) + " " + s["mode"].(string)
		if s["session"] == "" || s["since"] == "" {
			t.Errorf("missing session or since: %v", s)
		}
	}
	if modes[res1] != "notes forwarded" || modes["fixture://plain/res/1"] != "plain local-only" {
		t.Errorf("subscriptions = %v", modes)
	}

	unsubscribe(t, cs, res1)
	u.waitFor(t, uriSubscriptions, 3)
	for _, s := range read() {
		if s["uri"] == res1 {
			t.Errorf("unsubscribed URI still shown")
		}
	}
}

func TestBackendsResourceShowsState(t *testing.T) {
	m := startMux(t, fixture(t, "notes"), fixture(t, "broken", "-fail-start"))
	cs := connect(t, m, nil)
	toolNames(t, cs) // waits for the starts: mcp-mux://backends itself shows "starting" until then
	res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: uriBackends})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Backends []BackendStatus `json:"backends"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Backends) != 2 || v.Backends[0].State != "ready" || v.Backends[0].PID == 0 || v.Backends[0].Subscribe == nil || !*v.Backends[0].Subscribe || v.Backends[0].Resources != 3 {
		t.Errorf("notes: %+v", v.Backends[0])
	}
	if v.Backends[1].State == "ready" || v.Backends[1].LastError == "" {
		t.Errorf("broken: %+v", v.Backends[1])
	}
}
