package control

import (
	"bufio"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// shortDir is a directory of the test's own for the endpoints, made the
// way every platform's socket path fits (t.TempDir's may not on macOS).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "mmc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	t.Setenv(DirEnv, d)
	return d
}

func findAll(t *testing.T) ([]Endpoint, []string) {
	t.Helper()
	var warnings []string
	eps, err := Find(func(s string) { warnings = append(warnings, s) })
	if err != nil {
		t.Fatal(err)
	}
	return eps, warnings
}

// TestServeAnswersStatusAndCloseRemovesEndpoint: a listening process is
// found under its pid and answers its document; once closed it is found
// no more.
func TestServeAnswersStatusAndCloseRemovesEndpoint(t *testing.T) {
	shortDir(t)
	want := Document{Version: Version, PID: os.Getpid(), Config: "/x/mcp-mux.toml",
		Backends: []Backend{{Name: "alpha", State: "ready", Calls: 3, Errors: 1, P50: 1.5, P95: 9}}}
	srv, err := Listen(func() Document { return want })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	eps, warnings := findAll(t)
	if len(eps) != 1 || eps[0].PID != os.Getpid() || eps[0].Addr != srv.Addr() || len(warnings) != 0 {
		t.Fatalf("found %+v (warnings %q), want this process's endpoint %s", eps, warnings, srv.Addr())
	}
	got, err := Query(eps[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.PID != want.PID || got.Config != want.Config || len(got.Backends) != 1 || got.Backends[0] != want.Backends[0] {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if eps, _ := findAll(t); len(eps) != 0 {
		t.Fatalf("after Close, found %+v", eps)
	}
	if _, err := Query(Endpoint{PID: os.Getpid(), Addr: srv.Addr()}); err != ErrGone {
		t.Fatalf("query after Close: %v, want ErrGone", err)
	}
}

// TestUnknownRequestIsAnsweredWithAnError: the protocol is versioned, and
// a request of a later one gets an answer that says so, not silence.
func TestUnknownRequestIsAnsweredWithAnError(t *testing.T) {
	shortDir(t)
	srv, err := Listen(func() Document { return Document{Version: Version} })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := dial(Endpoint{PID: os.Getpid(), Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("metrics\n"))
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(line, `"error":"unknown request \"metrics\"`) || !strings.Contains(line, `"version":1`) {
		t.Fatalf("answer %q", line)
	}
}

// TestCloseEndsAClientThatSendsNothing: a connection that never sends
// its request does not keep Close waiting for the exchange's deadline.
func TestCloseEndsAClientThatSendsNothing(t *testing.T) {
	shortDir(t)
	srv, err := Listen(func() Document { return Document{Version: Version} })
	if err != nil {
		t.Fatal(err)
	}
	c, err := dial(Endpoint{PID: os.Getpid(), Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The server has taken the connection once it counts it.
	testkit.Eventually(t, 10*time.Second, "the server to take the connection", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns) == 1
	})
	start := time.Now()
	srv.Close()
	if d := time.Since(start); d >= ioTimeout {
		t.Fatalf("Close took %v: it waited for the silent client's deadline", d)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Fatalf("the silent client's connection is not closed: read %d, %v", n, err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
