package outq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// gate is a writer that blocks until opened: an agent that stopped
// reading, then resumed.
type gate struct {
	open chan struct{}
	out  testkit.SyncBuffer
}

func (g *gate) Write(p []byte) (int, error) {
	<-g.open
	return g.out.Write(p)
}

func notification(method, params string) *jsonrpc.Request {
	return &jsonrpc.Request{Method: method, Params: json.RawMessage(params)}
}

func TestOutQueueBoundsWhatAStalledAgentCosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{open: make(chan struct{})}
		var mu sync.Mutex
		var written []jsonrpc.ID
		q := New(g, func(id jsonrpc.ID) {
			mu.Lock()
			written = append(written, id)
			mu.Unlock()
		}, log.New(io.Discard))
		closed := make(chan struct{})
		defer close(closed)
		go q.Loop(closed)
		// The agent stops reading: the first write blocks, and after
		// stallLimit the queue counts it as not reading. (In the bubble
		// the clock moves only when every goroutine waits: the sleep is
		// exactly stallLimit and a bit of fake time, however busy the
		// machine.)
		q.Push(notification("notifications/message", `{"level":"info","data":"first"}`))
		time.Sleep(stallLimit + 50*time.Millisecond)

		for i := range 50_000 {
			uri := fmt.Sprintf("file:///r/%d", i%3)
			q.Push(notification("notifications/resources/updated", fmt.Sprintf(`{"uri":%q}`, uri)))
			q.Push(notification("notifications/progress", fmt.Sprintf(`{"progressToken":1,"progress":%d}`, i)))
			q.Push(notification("notifications/tools/list_changed", `{}`))
			if i%1000 == 0 {
				id, _ := jsonrpc.MakeID(float64(i))
				q.Push(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)})
			}
		}
		q.mu.Lock()
		held, live, bytes := len(q.items), len(q.items)-q.dead, q.bytes
		q.mu.Unlock()
		// One write may be blocked in the gate; what is queued is the three
		// URIs, one list_changed, the 50 responses and at most maxDroppable
		// progress notifications (the latest ones). Dropped ones linger until
		// they are half of what is held.
		if want := 3 + 1 + 50 + maxDroppable + 8; live > want || held > 2*want+64 {
			t.Errorf("%d messages queued (%d held) for a stalled agent, want at most %d", live, held, want)
		}
		if bytes > maxQueuedBytes {
			t.Errorf("%d notification bytes queued, over the %d budget", bytes, maxQueuedBytes)
		}

		close(g.open)
		testkit.Eventually(t, 5*time.Second, "the queue to drain", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(written) == 50
		})
		out := string(g.out.Bytes())
		for i := range 3 {
			if !strings.Contains(out, fmt.Sprintf(`"uri":"file:///r/%d"`, i)) {
				t.Errorf("no update for file:///r/%d after the agent resumed", i)
			}
		}
		if !strings.Contains(out, `"progress":49999`) {
			t.Error("the latest progress was dropped; the oldest should go first")
		}
		if n := strings.Count(out, "list_changed"); n > 3 {
			t.Errorf("%d list_changed written, want them coalesced", n)
		}
	})
}

func TestOutQueueKeepsOrderWhenTheAgentReads(t *testing.T) {
	var out testkit.SyncBuffer
	q := New(&out, func(jsonrpc.ID) {}, log.New(io.Discard))
	closed := make(chan struct{})
	defer close(closed)
	go q.Loop(closed)
	for i := range 100 {
		q.Push(notification("notifications/progress", fmt.Sprintf(`{"progressToken":1,"progress":%d}`, i)))
		id, _ := jsonrpc.MakeID(float64(i))
		q.Push(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)})
	}
	q.Flush(5 * time.Second)
	got := bytes.Split(bytes.TrimRight(out.Bytes(), "\n"), []byte("\n"))
	if len(got) != 200 {
		t.Fatalf("%d lines written, want 200", len(got))
	}
	for i := range 100 {
		if !strings.Contains(string(got[2*i]), fmt.Sprintf(`"progress":%d`, i)) || !strings.Contains(string(got[2*i+1]), fmt.Sprintf(`"id":%d`, i)) {
			t.Fatalf("line %d out of order: %s / %s", 2*i, got[2*i], got[2*i+1])
		}
	}
}

// An agent that reads gets every notification, however fast they come:
// coalescing is for an agent that does not read.
func TestOutQueueDeliversEveryUpdateToAReadingAgent(t *testing.T) {
	var out testkit.SyncBuffer
	q := New(&out, func(jsonrpc.ID) {}, log.New(io.Discard))
	// A busy test machine may leave the writer unscheduled for longer than
	// stallLimit, which would count as an agent not reading.
	q.stallAfter = time.Minute
	closed := make(chan struct{})
	defer close(closed)
	go q.Loop(closed)
	for range 20_000 {
		q.Push(notification("notifications/resources/updated", `{"uri":"file:///r/1"}`))
	}
	q.Flush(5 * time.Second)
	if n := strings.Count(string(out.Bytes()), "file:///r/1"); n != 20_000 {
		t.Errorf("the agent got %d of 20,000 updates", n)
	}
}

// slowReader is an agent that reads steadily, a pipe's worth at a time,
// but takes longer than stallLimit over one large batch. Its pace is a
// sleep, used only in a synctest bubble: fake time, exact however busy
// the machine, and no wait for an event.
type slowReader struct {
	out testkit.SyncBuffer
}

func (s *slowReader) Write(p []byte) (int, error) {
	const pipe = 64 << 10
	n := 0
	for n < len(p) {
		k := min(pipe, len(p)-n)
		time.Sleep(60 * time.Millisecond) // about 1 MB/s
		s.out.Write(p[n : n+k])
		n += k
	}
	return n, nil
}

// writingQueue is a queue to w with its writer running until closed is
// closed.
func writingQueue(w io.Writer) (q *Queue, closed chan struct{}) {
	q = New(w, func(jsonrpc.ID) {}, log.New(io.Discard))
	closed = make(chan struct{})
	go q.Loop(closed)
	return q, closed
}

// An agent that reads slowly is still reading: a write that is long only
// because the batch is large must not count as a stall (which coalesces,
// and so loses, updates). Before: a 256 KiB batch at 1 MB/s took 240 ms,
// over stallLimit, and the burst lost updates.
//
// In a synctest bubble: the reader's pace and the bursts' gaps are fake
// time, so the test takes no real time and a loaded machine cannot make
// the writer look stalled.
func TestOutQueueSlowButReadingAgentGetsEveryUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &slowReader{}
		q, closed := writingQueue(r)
		defer close(closed)
		const n = 8_000 // about 700 KB: several batches
		for i := range n {
			q.Push(notification("notifications/resources/updated", `{"uri":"file:///r/1"}`))
			if i%500 == 0 {
				time.Sleep(20 * time.Millisecond) // a backend's burst, arriving while the writer works
			}
		}
		q.Flush(30 * time.Second)
		if got := strings.Count(string(r.out.Bytes()), "file:///r/1"); got != n {
			t.Errorf("the agent got %d of %d updates", got, n)
		}
	})
}

// A backend's burst to a stdio agent that reads is read at the agent's
// pace: what waits in mux stays near paceAbove, not the burst, and the
// agent gets every update. Before pace, 20,000 updates queued 5-6 MB.
// (Fake time, as above: the reader's pace cannot look like a stall.)
func TestOutQueuePacesABurstToTheReadingAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &slowReader{}
		q, closed := writingQueue(r)
		defer close(closed)
		const n = 20_000
		line := []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///r/1"}}` + "\n")
		for range n {
			q.Pace(closed) // as door.Conn.Notify does
			q.PushLine(line, UpdatedKey("file:///r/1", nil), true)
		}
		q.Flush(time.Minute)
		if got := strings.Count(string(r.out.Bytes()), "file:///r/1"); got != n {
			t.Errorf("the agent got %d of %d updates", got, n)
		}
		q.mu.Lock()
		most := q.maxBytes
		q.mu.Unlock()
		if most > paceAbove+len(line) {
			t.Errorf("%d bytes of notifications waited in mux at once, want at most %d", most, paceAbove+len(line))
		}
	})
}

// pace never holds a backend for an agent that stopped reading: once the
// write has been blocked for stallLimit it returns at once, and the
// queue's bounds take over.
func TestPaceDoesNotWaitForAStalledAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{open: make(chan struct{})}
		q, closed := writingQueue(g)
		defer close(closed)
		start := time.Now()
		for i := range 50_000 {
			q.Pace(closed)
			q.Push(notification("notifications/resources/updated", fmt.Sprintf(`{"uri":"file:///r/%d"}`, i%3)))
		}
		if took := time.Since(start); took > 3*stallLimit {
			t.Errorf("50,000 notifications for a stalled agent held their backend %v (fake time), want about stallLimit", took)
		}
		close(g.open)
		q.Flush(time.Minute)
	})
}

// A response whose result the go-sdk encoded already is written without
// encoding it again, and reads exactly as the SDK's encoding would.
func TestResultLineIsWhatTheSDKWouldWrite(t *testing.T) {
	for _, c := range []struct {
		id     any
		result string
	}{
		{float64(7), `{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`},
		{"req-\u00e9<&>", `{"text":"line\nnext \u2028 <b>","n":1.10,"big":12345678901234567891}`},
		{float64(-3), `{}`},
	} {
		id, err := jsonrpc.MakeID(c.id)
		if err != nil {
			t.Fatal(err)
		}
		resp := &jsonrpc.Response{ID: id, Result: json.RawMessage(c.result)}
		want, err := jsonrpc.EncodeMessage(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ResultLine(id, resp.Result)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if json.Unmarshal(want, &a) != nil || json.Unmarshal(got, &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("ResultLine = %s\nthe SDK writes %s", got, want)
		}
		if !strings.HasSuffix(string(got), "}\n") || strings.Count(string(got), "\n") != 1 {
			t.Errorf("ResultLine = %q: want one line", got)
		}
	}
}
