package outq

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A session whose sends block (an HTTP agent that stopped reading) holds
// what the stdio policy allows: one update per URI, a bounded tail of
// progress, and no more than maxQueuedBytes; once it reads again it gets
// the latest of each, in order; and close ends its goroutine.
func TestNoteQueueOfAStalledSessionStaysBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewNotes(log.New(io.Discard), "s1")
		open := make(chan struct{})
		var mu sync.Mutex
		var sent []string
		send := func(what string) func(context.Context) error {
			return func(context.Context) error {
				<-open
				mu.Lock()
				sent = append(sent, what)
				mu.Unlock()
				return nil
			}
		}
		// push starts a sendLoop when pushNote asks for one, as enqueue
		// does; loops counts those running.
		var loops sync.WaitGroup
		push := func(method string, params any, send func(context.Context) error) {
			if start, _ := q.PushNote(method, params, send); start {
				loops.Go(func() { q.SendLoop(context.Background()) })
			}
		}
		push("notifications/message", &mcp.LoggingMessageParams{Level: "info", Data: "first"}, send("first"))
		// The first send blocks: the agent stalls. (Fake time in the
		// bubble: exactly this long, however busy the machine.)
		time.Sleep(stallLimit + 50*time.Millisecond)
		big := strings.Repeat("x", 4096)
		for i := range 5000 {
			uri := fmt.Sprintf("file:///r/%d/%s", i%5, big)
			push("notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: uri}, send(fmt.Sprintf("updated %d", i%5)))
			push("notifications/progress", &mcp.ProgressNotificationParams{ProgressToken: "t", Progress: float64(i)}, send(fmt.Sprintf("progress %d", i)))
		}
		q.mu.Lock()
		live, bytes := len(q.items)-q.dead, q.bytes
		q.mu.Unlock()
		if bytes > maxQueuedBytes || live > 5+maxDroppable+1 {
			t.Fatalf("a stalled session holds %d notifications, %d bytes; want at most %d and %d", live, bytes, 5+maxDroppable+1, maxQueuedBytes)
		}

		close(open) // it reads again
		testkit.Eventually(t, 5*time.Second, "the queue drains", func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return len(q.items) == 0 && !q.writing
		})
		mu.Lock()
		got := append([]string{}, sent...)
		mu.Unlock()
		if got[0] != "first" || got[len(got)-1] != "progress 4999" {
			t.Fatalf("sent %d notifications, first %q, last %q; want the first one first and the latest progress last", len(got), got[0], got[len(got)-1])
		}
		updates := map[string]int{}
		for _, s := range got {
			if strings.HasPrefix(s, "updated") {
				updates[s]++
			}
		}
		if len(updates) != 5 {
			t.Fatalf("updates sent: %v; want every URI's", updates)
		}

		// Drained, the queue holds no goroutine: an idle session costs none.
		loops.Wait()
		q.mu.Lock()
		sending := q.sending
		q.mu.Unlock()
		if sending {
			t.Fatal("the queue still counts a sendLoop after it drained")
		}
		push("notifications/progress", &mcp.ProgressNotificationParams{ProgressToken: "t"}, send("again"))
		loops.Wait()
		if mu.Lock(); sent[len(sent)-1] != "again" {
			t.Fatalf("after the queue drained, a new notification was not sent: last %q", sent[len(sent)-1])
		}
		mu.Unlock()

		q.Close()
		push("notifications/progress", &mcp.ProgressNotificationParams{ProgressToken: "t"}, send("late"))
		loops.Wait()
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.bytes != 0 || len(q.items) != 0 {
			t.Fatal("a closed queue took a notification")
		}
	})
}
