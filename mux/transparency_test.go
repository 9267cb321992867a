package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Tests that mcp-mux is invisible to the agent except by what it adds:
// what a server does directly, it does through mcp-mux.

// progressLog records the progress notifications one client received.
type progressLog struct {
	mu  sync.Mutex
	got []string // "token:message"
}

func (l *progressLog) opts() *mcp.ClientOptions {
	return &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		l.mu.Lock()
		l.got = append(l.got, fmt.Sprintf("%v:%s", r.Params.ProgressToken, r.Params.Message))
		l.mu.Unlock()
	}}
}

func (l *progressLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

// Agents choose progress tokens per session; two sessions using the same
// token on one backend at once must each get exactly their own progress,
// under their own token.
func TestSameProgressTokenInTwoSessionsDoesNotCross(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	var logs [2]progressLog
	var sessions [2]*mcp.ClientSession
	for i := range sessions {
		sessions[i] = connect(t, m, logs[i].opts())
	}
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			params := &mcp.CallToolParams{Name: "notes__progress", Arguments: map[string]any{"steps": 3 + 2*i, "delay_ms": 20}}
			params.SetProgressToken("same")
			if _, err := cs.CallTool(testkit.CtxT(t), params); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := range logs {
		steps := 3 + 2*i
		testkit.Eventually(t, 2*time.Second, fmt.Sprintf("session %d's %d progress notifications", i, steps), func() bool { return len(logs[i].all()) >= steps })
		testkit.Quiet(100 * time.Millisecond) // no more notifications may come: the fixture sent them all at once
		got := logs[i].all()
		if len(got) != steps {
			t.Errorf("session %d got %d progress notifications, want %d: %v", i, len(got), steps, got)
		}
		for j, g := range got {
			if want := fmt.Sprintf("same:step %d/%d", j+1, steps); g != want {
				t.Errorf("session %d notification %d = %q, want %q", i, j, g, want)
			}
		}
	}
}

// A request mux cancels because its request_timeout passed is cancelled at
// the backend with that reason, not "context canceled".
func TestTimedOutRequestIsCancelledAtBackendWithTheReason(t *testing.T) {
	cfg := testConfig(fixture(t, "notes"))
	cfg.Mux.RequestTimeout.Duration = 300 * time.Millisecond
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)
	if _, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__sleep", Arguments: map[string]any{"ms": 3000}}); err == nil {
		t.Fatal("a call past request_timeout succeeded")
	}
	var st struct {
		CancelReasons []string `json:"cancel_reasons"`
	}
	testkit.Eventually(t, 3*time.Second, "the backend to be told", func() bool {
		json.Unmarshal([]byte(callText(t, cs, "notes__stats", nil)), &st)
		return len(st.CancelReasons) > 0
	})
	if want := "mcp-mux: request_timeout (300ms) passed"; st.CancelReasons[0] != want {
		t.Errorf("the backend was told %q, want %q", st.CancelReasons[0], want)
	}
}

// logLog records the log messages one client received.
type logLog struct {
	mu  sync.Mutex
	got []string // "level logger data"
}

func (l *logLog) opts() *mcp.ClientOptions {
	return &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
		l.mu.Lock()
		l.got = append(l.got, fmt.Sprintf("%s %s %v", r.Params.Level, r.Params.Logger, r.Params.Data))
		l.mu.Unlock()
	}}
}

func (l *logLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

// A backend's log messages reach each session at or above the level it set,
// named after the backend; logging/setLevel reaches the backend (the most
// verbose any session asked for), also after it restarts.
func TestBackendLogMessagesFollowEachSessionsLevel(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	var logs [3]logLog
	var cs [3]*mcp.ClientSession
	for i := range cs {
		cs[i] = connect(t, m, logs[i].opts())
	}
	for i, level := range []mcp.LoggingLevel{"info", "error"} { // the third sets none
		if err := cs[i].SetLoggingLevel(testkit.CtxT(t), &mcp.SetLoggingLevelParams{Level: level}); err != nil {
			t.Fatal(err)
		}
	}
	var st struct {
		LogLevel string `json:"log_level"`
		PID      int    `json:"pid"`
	}
	stats := func() {
		json.Unmarshal([]byte(callText(t, cs[2], "notes__stats", nil)), &st)
	}
	testkit.Eventually(t, 2*time.Second, "the backend to get the level", func() bool { stats(); return st.LogLevel == "info" })

	callText(t, cs[2], "notes__log", map[string]any{"level": "warning", "logger": "db", "data": "disk slow"})
	callText(t, cs[2], "notes__log", map[string]any{"level": "error", "data": "disk full"})
	callText(t, cs[2], "notes__log", map[string]any{"level": "debug", "data": "noise"})
	testkit.Eventually(t, 2*time.Second, "the error to reach both sessions", func() bool {
		return len(logs[0].all()) == 2 && len(logs[1].all()) == 1
	})
	testkit.Quiet(100 * time.Millisecond) // no third log line may come: the fixture sent both at once
	if got, want := logs[0].all(), []string{"warning notes/db disk slow", "error notes disk full"}; !slices.Equal(got, want) {
		t.Errorf("the info session got %q, want %q", got, want)
	}
	if got, want := logs[1].all(), []string{"error notes disk full"}; !slices.Equal(got, want) {
		t.Errorf("the error session got %q, want %q", got, want)
	}
	if got := logs[2].all(); len(got) != 0 {
		t.Errorf("a session that set no level got %q", got)
	}

	// A restarted backend is told the level again.
	old := st.PID
	cs[2].CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__crash", Arguments: map[string]any{"code": 1}})
	testkit.Eventually(t, 5*time.Second, "the backend to come back told the level", func() bool {
		_, err := cs[2].CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "notes__stats"})
		if err != nil {
			return false
		}
		stats()
		return st.PID != old && st.LogLevel == "info"
	})
}

// List results carry the backends' cache hints: a resources page its
// backend page's, a merged list the most cautious of its parts'. mux's own
// resources come after every backend's.
func TestListsCarryCacheHintsAndMuxResourcesComeLast(t *testing.T) {
	m := startMux(t,
		fixture(t, "a", "-cache-ttl-ms", "5000", "-resources", "5", "-page-size", "2"),
		fixture(t, "b", "-cache-ttl-ms", "2000", "-cache-scope", "private"),
	)
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tools.TTLMs != 2000 || tools.CacheScope != "private" {
		t.Errorf("tools/list hints: ttl %d scope %q, want 2000 private (the most cautious part)", tools.TTLMs, tools.CacheScope)
	}
	first, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.TTLMs != 5000 || first.CacheScope != "public" {
		t.Errorf("first resources page (a's) hints: ttl %d scope %q, want a's: 5000 public", first.TTLMs, first.CacheScope)
	}
	var uris []string
	for _, r := range first.Resources {
		uris = append(uris, r.URI)
	}
	if want := []string{"fixture://a/res/1", "fixture://a/res/2"}; !slices.Equal(uris, want) {
		t.Errorf("first page %v, want a's first page %v: a client reading one page sees the backends' resources", uris, want)
	}
	var last *mcp.ListResourcesResult
	for page := first; ; {
		last = page
		if page.NextCursor == "" {
			break
		}
		if page, err = cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: page.NextCursor}); err != nil {
			t.Fatal(err)
		}
	}
	n := len(last.Resources)
	if n < 2 || last.Resources[n-2].URI != uriSubscriptions || last.Resources[n-1].URI != uriBackends {
		t.Errorf("the last page does not end with mux's own resources: %v", last.Resources)
	}
	if last.TTLMs != 0 || last.CacheScope != "private" {
		t.Errorf("the page with mux's own resources: ttl %d scope %q, want 0 private", last.TTLMs, last.CacheScope)
	}
}

// The agent gets the backends' instructions, each under its backend's name
// and prefix, after one sentence of mux's; [mux] instructions replaces
// them. serverInfo has mux's name, version and a title.
func TestInitializeCarriesTheBackendsInstructions(t *testing.T) {
	m := startMux(t,
		fixture(t, "notes", "-instructions", "Use notes for notes."),
		fixture(t, "plain"),
		fixture(t, "tasks", "-instructions", "Tasks are due on Fridays."),
	)
	cs := connect(t, m, nil)
	r := cs.InitializeResult()
	for _, want := range []string{
		"This server is mcp-mux",
		"## notes (tools and prompts prefixed `notes__`)\n\nUse notes for notes.",
		"## tasks (tools and prompts prefixed `tasks__`)\n\nTasks are due on Fridays.",
	} {
		if !strings.Contains(r.Instructions, want) {
			t.Errorf("instructions lack %q:\n%s", want, r.Instructions)
		}
	}
	if strings.Contains(r.Instructions, "## plain") {
		t.Errorf("a backend without instructions has a section:\n%s", r.Instructions)
	}
	if si := r.ServerInfo; si.Name != "mcp-mux" || si.Version != "test" || si.Title == "" {
		t.Errorf("serverInfo = %+v, want mcp-mux's name, version and a title", si)
	}

	cfg := testConfig(fixture(t, "notes", "-instructions", "Use notes for notes."))
	cfg.Mux.Instructions = "Only what the user wrote."
	if got := connect(t, startMuxConfig(t, cfg), nil).InitializeResult().Instructions; got != "Only what the user wrote." {
		t.Errorf("with [mux] instructions: %q", got)
	}
}

// initialize answers at once when mux knows every backend's instructions
// from its last run: the agent does not wait for backends to start.
func TestInitializeAnswersAtOnceWithTheInstructionsOfTheLastRun(t *testing.T) {
	// 1 s: slower than a connect, and, with a process's start (longer
	// under Wine), well within instructionsWait.
	spec := fixture(t, "slowpoke", "-instructions", "Slow but sure.", "-start-delay", "1s")
	first := startMux(t, spec)
	if got := connect(t, first, nil).InitializeResult().Instructions; !strings.Contains(got, "Slow but sure.") {
		t.Fatalf("first run: instructions lack the backend's:\n%s", got)
	}
	first.Close()

	again := startMux(t, spec)
	got := connect(t, again, nil).InitializeResult().Instructions
	select {
	case <-again.members()[0].initialized:
		t.Errorf("initialize waited for the backend's, though its instructions were known")
	default:
	}
	if !strings.Contains(got, "## slowpoke (tools and prompts prefixed `slowpoke__`)\n\nSlow but sure.") {
		t.Errorf("second run: instructions lack the remembered ones:\n%s", got)
	}
}

// Backends are pinned to the handshake era unless protocol = "auto", which
// probes server/discover: a backend of the current era is then spoken to
// in it, and serves through mux as any other (lists, calls, subscriptions).
func TestBackendProtocolAutoSpeaksTheCurrentEra(t *testing.T) {
	pinned, auto := fixture(t, "pinned"), fixture(t, "modern")
	auto.Protocol = "auto"
	m := startMux(t, pinned, auto)
	u := newUpdates()
	cs := connect(t, m, u.opts())
	toolNames(t, cs) // both started
	st := m.Status()
	if st[0].ProtocolVersion != "2025-11-25" || st[1].ProtocolVersion != "2026-07-28" {
		t.Fatalf("protocols: pinned %q, auto %q; want 2025-11-25 and 2026-07-28", st[0].ProtocolVersion, st[1].ProtocolVersion)
	}
	if got := callText(t, cs, "modern__echo", map[string]any{"x": 1}); got != `{"x":1}` {
		t.Errorf("modern__echo = %q", got)
	}
	const uri = "fixture://modern/res/1"
	subscribe(t, cs, uri)
	callText(t, cs, "modern__update", map[string]any{"uri": uri})
	u.waitFor(t, uri, 1)
}

// A read whose backend sent no cache hints gets valid defaults, not the
// invalid scope "" (which the TypeScript SDK v2 client rejects).
func TestReadResultHasValidCacheHints(t *testing.T) {
	m := startMux(t, fixture(t, "notes", "-cache-scope", "none"))
	cs := connect(t, m, nil)
	// The first read comes before any list, and so takes the go-sdk's
	// path; once a list went out, reads are passed through as bytes.
	for i, uri := range []string{"fixture://notes/res/1", "fixture://notes/items/7", "fixture://notes/res/2"} {
		if i == 1 {
			toolNames(t, cs)
		}
		res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatal(err)
		}
		if res.CacheScope != "public" && res.CacheScope != "private" {
			t.Errorf("read %s: cacheScope %q", uri, res.CacheScope)
		}
	}
}
