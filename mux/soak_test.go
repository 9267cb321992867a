package mux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// TestSoakKillsUnderLoad: several clients send requests while backends are
// killed at random, a fourth backend misbehaves (garbage lines, malformed
// messages, floods of updates) and one agent never reads its stdout. Every
// request is answered (success or error, none hangs), the misbehaving
// backend is never restarted for what it sends, every subscription is
// restored on the new processes, the stalled agent gets its updates once it
// reads, no process outlives the mux and no goroutine outlives Close.
// Bounded: it stops by itself after soakDuration (MCP_MUX_SOAK overrides
// it, e.g. "60s").
func TestSoakKillsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	soakDuration := 6 * time.Second
	if d, err := time.ParseDuration(os.Getenv("MCP_MUX_SOAK")); err == nil {
		soakDuration = d
	}

	cfg := testConfig(fixture(t, "notes"), fixture(t, "tasks"), fixture(t, "plain", "-subscribe=false"), fixture(t, "rogue"))
	cfg.Mux.RestartMax = 1 << 20 // keep restarting: this is about recovery, not giving up
	cfg.Mux.RequestTimeout.Duration = 5 * time.Second
	m := New(cfg, testLogger(t), "test")
	m.backoffBase = 10 * time.Millisecond
	m.Start()

	const clients = 4
	sessions := make([]*mcp.ClientSession, clients)
	held := map[string][]string{} // backend → URIs held (forwarded ones must be restored)
	for i := range sessions {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := m.Connect(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprint("soak", i)}, nil).Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		sessions[i] = cs
		for _, b := range []string{"notes", "tasks", "plain"} {
			uri := fmt.Sprintf("fixture://%s/res/%d", b, i%3+1)
			if err := cs.Subscribe(testkit.CtxT(t), &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatal(err)
			}
			held[b] = append(held[b], uri)
		}
	}

	slow := stallingAgent(t, m, "fixture://rogue/res/1")

	var (
		requests, ok, failed, hung atomic.Int64
		kills                      atomic.Int64
		pidsMu                     sync.Mutex
		pids                       = map[int]bool{}
	)
	recordPIDs := func() {
		pidsMu.Lock()
		defer pidsMu.Unlock()
		for _, s := range m.Status() {
			if s.PID > 0 {
				pids[s.PID] = true
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				backend := []string{"notes", "tasks", "plain", "rogue"}[r.IntN(4)]
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				var err error
				switch n % 3 {
				case 0:
					_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: backend + "__echo", Arguments: map[string]any{"n": n}})
				case 1:
					_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fixture://" + backend + "/res/" + strconv.Itoa(r.IntN(3)+1)})
				case 2:
					_, err = cs.ListTools(ctx, nil)
				}
				requests.Add(1)
				switch {
				case errors.Is(ctx.Err(), context.DeadlineExceeded):
					hung.Add(1)
				case err != nil:
					failed.Add(1)
				default:
					ok.Add(1)
				}
				cancel()
			}
		}()
	}
	var misdeeds atomic.Int64
	wg.Add(1)
	go func() { // the misbehaving backend, made to misbehave
		defer wg.Done()
		r := rand.New(rand.NewPCG(7, 7))
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			var err error
			if n%4 == 0 {
				_, err = sessions[0].CallTool(ctx, &mcp.CallToolParams{Name: "rogue__update", Arguments: map[string]any{"uri": "fixture://rogue/res/1", "count": 500}})
			} else {
				line := misbehaviour[r.IntN(len(misbehaviour))]
				_, err = sessions[0].CallTool(ctx, &mcp.CallToolParams{Name: "rogue__noise", Arguments: map[string]any{"text": line}})
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				hung.Add(1)
			} else if err == nil {
				misdeeds.Add(1)
			}
			cancel()
		}
	}()
	// The pid each backend had when last killed: until the supervisor sees
	// that process gone, Status may still call it ready. Written by the
	// killer, read once it is done.
	var lastKilled [3]int
	wg.Add(1)
	go func() { // the killer
		defer wg.Done()
		r := rand.New(rand.NewPCG(42, 42))
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			recordPIDs()
			i := r.IntN(3)
			st := m.Status()[i]
			if st.State == stateReady && st.PID > 0 {
				killProcess(st.PID)
				kills.Add(1)
				lastKilled[i] = st.PID
			}
		}
	}()
	// Pacing, not a wait: the soak runs for its set time while the
	// goroutines above load and kill. What it checks comes after, each
	// with its own wait; a shorter soak checks the same, with less load.
	time.Sleep(soakDuration)
	close(stop)
	wg.Wait()

	// Every backend comes back, with each forwarded subscription re-sent.
	for i, name := range []string{"notes", "tasks", "plain"} {
		waitReady(t, m, i, lastKilled[i])
		recordPIDs()
		st := fixtureStats(t, sessions[0], name+"__stats")
		for _, uri := range held[name] {
			want := 1
			if name == "plain" {
				want = 0 // local-only: never sent
			}
			if st.Subscribe[uri] != want {
				t.Errorf("%s (pid %d): %s subscribed %d times, want %d", name, st.PID, uri, st.Subscribe[uri], want)
			}
		}
	}
	if got := m.subs.Len(); got != clients*3+1 {
		t.Errorf("registry holds %d subscriptions, want %d: %v", got, clients*3+1, m.subs.All())
	}
	if st := m.Status()[3]; st.Restarts != 0 || st.State != stateReady {
		t.Errorf("the misbehaving backend was restarted %d times (state %s, %s): what it sends must not cost its connection", st.Restarts, st.State, st.LastError)
	}
	updates := slow.resume(t)
	t.Logf("soak %v: %d requests (%d ok, %d errors, %d hung), %d kills, %d processes, %d subscriptions restored; %d misdeeds of the rogue backend; the stalled agent got %d updates once it read",
		soakDuration, requests.Load(), ok.Load(), failed.Load(), hung.Load(), kills.Load(), len(pids), m.subs.Len(), misdeeds.Load(), updates)
	if updates == 0 {
		t.Error("the stalled agent got no update once it read again")
	}
	if hung.Load() != 0 {
		t.Errorf("%d requests hung", hung.Load())
	}
	if kills.Load() < 5 || ok.Load() == 0 {
		t.Errorf("the soak did not soak: %d kills, %d ok", kills.Load(), ok.Load())
	}

	for _, cs := range sessions {
		cs.Close()
	}
	m.Close()
	for pid := range pids {
		if processAlive(pid) {
			t.Errorf("process %d outlived the mux", pid)
		}
	}
}

// misbehaviour is what the rogue backend prints on its stdout: noise, and
// lines that look like JSON-RPC but are not what the go-sdk decodes (each
// once tore the connection down), and notifications without params.
var misbehaviour = []string{
	"a banner, not JSON",
	`{"jsonrpc":"2.0"}`,
	`{"jsonrpc":"2.0","method":5}`,
	`{"JSONRPC":"2.0","method":"notifications/progress"}`,
	`{"jsonrpc":"2.0","id":{},"result":{}}`,
	`{"jsonrpc":"2.0","id":true,"result":{}}`,
	`{"jsonrpc":"2.0","id":987654,"result":{}}`,
	strings.Repeat("[", 2000) + strings.Repeat("]", 2000),
	`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":null}`,
	`{"jsonrpc":"2.0","method":"notifications/resources/updated"}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":null}`,
	`{"jsonrpc":"2.0","method":"notifications/message","params":null}`,
	`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":7}`,
}

// stalled is an agent on a stdio connection that subscribes, then does not
// read its stdout until resume.
type stalled struct {
	m      *Mux
	out    *io.PipeReader
	in     *io.PipeWriter
	stdout *io.PipeWriter
}

func stallingAgent(t *testing.T, m *Mux, uri string) *stalled {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	if _, err := m.Connect(context.Background(), door.Stdio(inR, outW, door.StdioOptions{Drain: time.Second})); err != nil {
		t.Fatal(err)
	}
	s := &stalled{m: m, out: outR, in: inW, stdout: outW}
	go fmt.Fprintf(inW, "%s\n%s\n%s\n",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stalled","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`)
	return s
}

// resume reads what waited for the agent (the answer to its subscribe and
// the updates), then ends its session; it returns the number of
// resources/updated it got.
func (s *stalled) resume(t *testing.T) int {
	t.Helper()
	sc := bufio.NewScanner(s.out)
	sc.Buffer(nil, 1<<20)
	lines := make(chan string)
	go func() {
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	n, subscribed := 0, false
	for quiet := time.After(time.Hour); ; {
		select {
		case l := <-lines:
			switch {
			case strings.Contains(l, "notifications/resources/updated"):
				n++
			case strings.HasPrefix(l, `{"jsonrpc":"2.0","id":2,"result"`):
				subscribed = true
			}
			if subscribed {
				quiet = time.After(200 * time.Millisecond)
			}
			continue
		case <-quiet:
		case <-time.After(10 * time.Second):
			t.Error("the stalled agent's output stopped before the answer to its subscribe")
		}
		break
	}
	s.in.Close() // stdin EOF ends the session
	testkit.Eventually(t, 5*time.Second, "the stalled session to end", func() bool {
		s.m.mu.Lock()
		defer s.m.mu.Unlock()
		return len(s.m.sessions) == 4
	})
	s.stdout.Close()
	for range lines {
	}
	return n
}
