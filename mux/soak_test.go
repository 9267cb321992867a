package mux

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// TestSoakKillsUnderLoad: several clients send requests while backends are
// killed at random. Every request is answered (success or error, none
// hangs), every subscription is restored on the new processes, no process
// outlives the mux and no goroutine outlives Close. Bounded: it stops by
// itself after soakDuration (MCP_MUX_SOAK overrides it, e.g. "60s").
func TestSoakKillsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	soakDuration := 6 * time.Second
	if d, err := time.ParseDuration(os.Getenv("MCP_MUX_SOAK")); err == nil {
		soakDuration = d
	}

	cfg := testConfig(fixture("notes"), fixture("tasks"), fixture("plain", "-subscribe=false"))
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
			if err := cs.Subscribe(ctxT(t), &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatal(err)
			}
			held[b] = append(held[b], uri)
		}
	}

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
				backend := []string{"notes", "tasks", "plain"}[r.IntN(3)]
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
			st := m.Status()[r.IntN(3)]
			if st.State == stateReady && st.PID > 0 {
				syscall.Kill(st.PID, syscall.SIGKILL)
				kills.Add(1)
			}
		}
	}()
	time.Sleep(soakDuration)
	close(stop)
	wg.Wait()

	// Every backend comes back, with each forwarded subscription re-sent.
	for i, name := range []string{"notes", "tasks", "plain"} {
		waitReady(t, m, i, 0)
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
	if got := m.subs.Len(); got != clients*3 {
		t.Errorf("registry holds %d subscriptions, want %d", got, clients*3)
	}
	t.Logf("soak %v: %d requests (%d ok, %d errors, %d hung), %d kills, %d processes, %d subscriptions restored",
		soakDuration, requests.Load(), ok.Load(), failed.Load(), hung.Load(), kills.Load(), len(pids), m.subs.Len())
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

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ')' {
			return i+2 < len(s) && s[i+2] != 'Z'
		}
	}
	return true
}
