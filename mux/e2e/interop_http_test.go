package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The interop suite over HTTP, both ways: server-everything serving
// Streamable HTTP as a remote backend of mcp-mux (compared with the same
// server reached directly by the TypeScript client), and several
// TypeScript clients at once on one `mcp-mux serve --http`.

// everythingHTTP starts server-everything in its streamableHttp mode on a
// free loopback port and returns its endpoint; it is stopped when t ends
// (after all of t's parallel subtests). The server takes its port from
// PORT and, given 0, says "port 0", so the port is picked here; another
// process may take it in between: then the server exits and another is
// tried.
func (ix *interop) everythingHTTP(t *testing.T) string {
	t.Helper()
	var last string
	for range 3 {
		port := freePort(t)
		cmd := exec.Command(ix.node, ix.script(serverEverything), "streamableHttp")
		cmd.Dir = ix.dir
		cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
		cmd.Stdout = io.Discard // a line per request
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		listening, done := make(chan struct{}), make(chan struct{})
		log := &testkit.SyncBuffer{}
		go func() {
			defer close(done)
			sc := bufio.NewScanner(stderr)
			said := false
			for sc.Scan() {
				fmt.Fprintln(log, sc.Text())
				if !said && strings.Contains(sc.Text(), "listening on port "+strconv.Itoa(port)) {
					said = true
					close(listening)
				}
			}
			io.Copy(io.Discard, stderr)
			cmd.Wait()
		}()
		select {
		case <-listening:
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-done
			})
			return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
		case <-done:
			last = log.String()
		case <-time.After(interopCheckTimeout):
			cmd.Process.Kill()
			<-done
			t.Fatalf("server-everything streamableHttp did not listen on port %d within %v:\n%s", port, interopCheckTimeout, log)
		}
	}
	t.Fatalf("server-everything streamableHttp did not start (3 tries); last:\n%s", last)
	return ""
}

// freePort is a loopback TCP port nobody listens on, for now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// muxOfRemote is mcp-mux (over stdio) with the endpoint url as its one,
// remote, backend named like s's.
func (ix *interop) muxOfRemote(t *testing.T, s refServer, url string) interopTarget {
	t.Helper()
	backend := fmt.Sprintf("[[backend]]\nname = %q\nurl = %q\nrestart = \"never\"\n", s.backend, url)
	return interopTarget{Name: "mux", Command: testkit.MuxBin(t), Args: []string{"--config", ix.muxConfig(t, backend)}, Prefix: s.backend + "__", TimeoutMs: interopCheckTimeout.Milliseconds()}
}

// TestInteropStreamableHTTPBackendThroughMuxMatchesBareServer: with
// server-everything serving Streamable HTTP, what the TypeScript client sees
// through mcp-mux (where it is a remote backend: url = ...) is what it
// sees talking to the server directly over HTTP, check by check. One server
// serves every check, bare and through mcp-mux: each client is a session of
// its own there.
func TestInteropStreamableHTTPBackendThroughMuxMatchesBareServer(t *testing.T) {
	ix := interopSetup(t)
	url := ix.everythingHTTP(t)
	bare := interopTarget{Name: "bare", URL: url, TimeoutMs: interopCheckTimeout.Milliseconds()}
	for _, c := range []struct {
		name, check string
		compare     func(t *testing.T, b, m *interopResult)
	}{
		{"tools", "tools-list", sameTools},
		{"prompts", "prompts", samePrompts},
		{"resources", "resources", sameResources},
		{"call", "call-echo", sameResults("call")},
		{"subscription", "everything-subscribe", nil},
		{"progress", "progress", sameProgress("remote progress before the response")},
		{"cancellation", "cancellation", nil},
		{"logging", "logging", logsUnderBackend(serverEverything.backend)},
		{"instructions", "instructions", carriesInstructions},
		{"sampling", "sampling", nil},
		{"elicitation", "elicitation", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ix.transparencyOf(t, "remote "+c.name, c.check, bare, ix.muxOfRemote(t, serverEverything, url), c.compare)
		})
	}
}

// muxHTTP is `mcp-mux serve --http 127.0.0.1:0` with servers as stdio
// backends (server-memory behind spy.mjs, writing to the target's SpyLog),
// as a target. mcp-mux stops when t ends; its backends must be gone then.
func (ix *interop) muxHTTP(t *testing.T, servers ...refServer) interopTarget {
	t.Helper()
	tg := interopTarget{Name: "mux", Prefixes: map[string]string{}, SpyLog: filepath.Join(t.TempDir(), "spy.jsonl"), MuxPIDs: true, pids: new([]int), TimeoutMs: interopCheckTimeout.Milliseconds()}
	var tables []string
	for _, s := range servers {
		spy := ""
		if s.memory {
			spy = tg.SpyLog
		}
		tables = append(tables, ix.backendTOML(t, s, spy))
		tg.Prefixes[s.backend] = s.backend + "__"
	}
	if len(servers) == 1 {
		tg.Prefix = servers[0].backend + "__"
	}
	// Registered first, so it runs once mcp-mux is stopped.
	t.Cleanup(func() { waitGone(t, *tg.pids, 5*time.Second) })
	h := startHTTPMux(t, ix.muxConfig(t, tables...))
	tg.URL, tg.log = h.url, h.stderr.String
	return tg
}

// TestInteropMuxServingHTTPMatchesBareHTTPServer: what the TypeScript
// client sees of server-everything through `mcp-mux serve --http` (the
// server a stdio backend) is what it sees of server-everything serving
// Streamable HTTP itself: the checks whose messages travel outside a plain
// request and response (notifications, server-to-client requests,
// cancellation). "no-GET": a client that opens no GET stream, which the
// spec allows: what belongs to a request must then come on that request's
// own stream. Each check has its own mcp-mux, whose first session's
// capabilities its backends are told.
func TestInteropMuxServingHTTPMatchesBareHTTPServer(t *testing.T) {
	ix := interopSetup(t)
	url := ix.everythingHTTP(t)
	for _, c := range []struct {
		name, check string
		noGET       bool
		compare     func(t *testing.T, b, m *interopResult)
	}{
		{"subscription", "everything-subscribe", false, nil},
		{"progress", "progress", false, sameProgress("serve --http progress before the response")},
		{"cancellation", "cancellation", false, nil},
		{"logging", "logging", false, logsUnderBackend(serverEverything.backend)},
		{"sampling", "sampling", false, nil},
		{"elicitation", "elicitation", false, nil},
		{"progress no-GET", "progress", true, sameProgress("serve --http progress before the response")},
		{"sampling no-GET", "sampling", true, nil},
		{"elicitation no-GET", "elicitation", true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bare := interopTarget{Name: "bare", URL: url, NoGET: c.noGET, TimeoutMs: interopCheckTimeout.Milliseconds()}
			mux := ix.muxHTTP(t, serverEverything)
			mux.NoGET = c.noGET
			ix.transparencyOf(t, "serve --http "+c.name, c.check, bare, mux, c.compare)
		})
	}
}

// TestInteropTypeScriptClientsShareOneMuxOverHTTP: two (or three)
// TypeScript clients at once on one `mcp-mux serve --http 127.0.0.1:0`,
// with stdio backends behind it. Each check (see its header in
// testdata/interop/checks) opens the sessions itself and asserts what each
// one sees; server-memory runs behind spy.mjs, so the checks also see what
// reached the backend.
func TestInteropTypeScriptClientsShareOneMuxOverHTTP(t *testing.T) {
	ix := interopSetup(t)
	for _, c := range []struct {
		name, check string
		servers     []refServer
		more        func(t *testing.T, r *interopResult)
	}{
		// Subscriptions and updates per session, on one backend URI and on
		// different ones.
		{"updates-only-to-subscribers", "sessions-updates", []refServer{serverMemory, serverEverything}, nil},
		// The same progress token from two sessions at once.
		{"progress-only-to-its-session", "sessions-progress", []refServer{serverEverything}, func(t *testing.T, r *interopResult) {
			if late := r.Observed["lateProgress"]; late != nil {
				gap("serve --http progress before the response", t, fmt.Sprintf("progress after the response: %v", late))
			}
		}},
		// DELETE: the sessions list shrinks; the last holder of a URI
		// leaving unsubscribes the backend.
		{"ended-session-is-cleaned-up", "sessions-cleanup", []refServer{serverMemory}, nil},
		// A client of the current era (2026-07-28), served statelessly,
		// beside one of the handshake era.
		{"current-era-client", "current-era", []refServer{serverEverything}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tg := ix.muxHTTP(t, c.servers...)
			ctx, cancel := context.WithTimeout(context.Background(), interopTestTimeout)
			defer cancel()
			r := ix.run(ctx, t, c.check, tg)
			mustPass(t, r)
			if c.more != nil {
				c.more(t, r)
			}
			t.Logf("%s: %s", c.check, show(r.Observed))
		})
	}
}

// gap fails t with what, unless feature is listed in interopGaps: then it
// only logs it.
func gap(feature string, t *testing.T, what string) {
	t.Helper()
	if why, listed := interopGaps[feature]; listed {
		t.Logf("known gap %q (%s): %s", feature, why, what)
		return
	}
	t.Error(what)
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
