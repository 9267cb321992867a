package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	m := startMux(t, fixture("notes"))
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
			if _, err := cs.CallTool(ctxT(t), params); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := range logs {
		steps := 3 + 2*i
		eventually(t, 2*time.Second, fmt.Sprintf("session %d's %d progress notifications", i, steps), func() bool { return len(logs[i].all()) >= steps })
		time.Sleep(100 * time.Millisecond) // nothing more may come
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
	cfg := testConfig(fixture("notes"))
	cfg.Mux.RequestTimeout.Duration = 300 * time.Millisecond
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)
	if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "notes__sleep", Arguments: map[string]any{"ms": 3000}}); err == nil {
		t.Fatal("a call past request_timeout succeeded")
	}
	var st struct {
		CancelReasons []string `json:"cancel_reasons"`
	}
	eventually(t, 3*time.Second, "the backend to be told", func() bool {
		json.Unmarshal([]byte(callText(t, cs, "notes__stats", nil)), &st)
		return len(st.CancelReasons) > 0
	})
	if want := "mcp-mux: request_timeout (300ms) passed"; st.CancelReasons[0] != want {
		t.Errorf("the backend was told %q, want %q", st.CancelReasons[0], want)
	}
}
