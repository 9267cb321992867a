package rendezvous

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// shortDir is a directory whose socket paths fit (t.TempDir's may not;
// Windows' pipes are not files, and its temporary directory is short).
func shortDir(t *testing.T) string {
	t.Helper()
	base := "/tmp"
	if runtime.GOOS == "windows" {
		base = ""
	}
	d, err := os.MkdirTemp(base, "rv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, "run")
}

func place(t *testing.T, dir, build string) Place {
	t.Helper()
	cfg := filepath.Join(filepath.Dir(dir), "mcp-mux.toml")
	os.WriteFile(cfg, nil, 0o600)
	p, err := For(dir, cfg, build)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serveHellos answers every session's hello with a welcome until ln closes.
func serveHellos(ln *Listener, pid int) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			if _, err := ReadHello(bufio.NewReader(c)); err == nil {
				WriteWelcome(c, Welcome{PID: pid})
			}
			c.Read(make([]byte, 1)) // until the session closes
		}()
	}
}

// sayHello is a session's first exchange, as package relay has it: the
// place's process must answer at once.
func sayHello(c net.Conn) error {
	c.SetDeadline(time.Now().Add(HelloTimeout))
	defer c.SetDeadline(time.Time{})
	if err := WriteHello(c, Hello{Build: "b1"}); err != nil {
		return fmt.Errorf("saying hello: %w", err)
	}
	w, err := ReadWelcome(bufio.NewReader(c))
	if err != nil {
		return fmt.Errorf("reading the welcome: %w", err)
	}
	if w.PID != 1 {
		return fmt.Errorf("welcome from pid %d, want 1", w.PID)
	}
	return nil
}

func TestTenSessionsAtOnceStartOneProcess(t *testing.T) {
	p := place(t, shortDir(t), "b1")
	var spawns atomic.Int32
	var mu sync.Mutex
	var lns []*Listener
	spawn := func() (<-chan struct{}, error) {
		spawns.Add(1)
		// What the long-lived process does: it may start a moment later.
		go func() {
			ln, err := Listen(p)
			if err != nil {
				return
			}
			mu.Lock()
			lns = append(lns, ln)
			mu.Unlock()
			serveHellos(ln, 1)
		}()
		return nil, nil
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, ln := range lns {
			ln.Close()
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Meet(p, spawn)
			if err != nil {
				errs <- err
				return
			}
			t.Cleanup(func() { c.Close() })
			if err := sayHello(c); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := spawns.Load(); n != 1 {
		t.Errorf("%d processes started for 10 sessions at once, want 1", n)
	}
}

func TestASecondListenerOfAPlaceIsRefused(t *testing.T) {
	p := place(t, shortDir(t), "b1")
	ln, err := Listen(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go serveHellos(ln, 1)
	if _, err := Listen(p); err != ErrRunning {
		t.Fatalf("second Listen: %v, want ErrRunning", err)
	}
	// The first one still serves, and no session starts another.
	c, err := Meet(p, func() (<-chan struct{}, error) { t.Error("spawned beside a running listener"); return nil, nil })
	if err != nil {
		t.Fatalf("meeting the first listener after a second Listen: %v", err)
	}
	defer c.Close()
	if err := sayHello(c); err != nil {
		t.Fatalf("the first listener after a second Listen: %v", err)
	}
}

func TestHelloRoundTripsAndIsBounded(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go WriteHello(a, Hello{Build: "x", Cwd: "/p", Environ: []string{"A=1"}, PID: 7})
	h, err := ReadHello(bufio.NewReader(b))
	if err != nil || h.Cwd != "/p" || h.PID != 7 || h.V != Version {
		t.Fatalf("hello %+v, %v", h, err)
	}
	big := make([]byte, MaxHello+10)
	for i := range big {
		big[i] = 'x'
	}
	go a.Write(big)
	b.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := ReadHello(bufio.NewReader(b)); err == nil {
		t.Fatal("a hello past MaxHello was read")
	}
}

func TestBuildIDIsRememberedByTheFile(t *testing.T) {
	dir := shortDir(t)
	os.MkdirAll(dir, 0o700)
	a, err := BuildID(dir)
	if err != nil || len(a) != 64 {
		t.Fatalf("BuildID: %q, %v", a, err)
	}
	b, err := BuildID(dir)
	if err != nil || a != b {
		t.Fatalf("second BuildID: %q, %v, want %q", b, err, a)
	}
	m, _ := filepath.Glob(filepath.Join(dir, "build-*"))
	if len(m) != 1 {
		t.Fatalf("memo files: %v", m)
	}
}

func TestAProcessThatEndsAtItsStartIsNotWaitedFor(t *testing.T) {
	p := place(t, shortDir(t), "b1")
	start := time.Now()
	_, err := Meet(p, func() (<-chan struct{}, error) {
		ended := make(chan struct{})
		close(ended) // a process that exits at once, say on a broken config
		return ended, nil
	})
	if err == nil {
		t.Fatal("met a process that ended")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Meet waited %s for a process that had ended", d)
	}
}
