package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Remote backends through the binary: the fixture serving over HTTP in a
// process of its own, next to a stdio one, as an agent sees them.

// stdioBackend is a [[backend]] running the fixture over stdio.
func stdioBackend(t testing.TB, name string) string {
	t.Helper()
	return fmt.Sprintf("[[backend]]\nname = %q\ncommand = %q\nargs = [\"-name\", %q]\n\n", name, testkit.FixtureBin(t), name)
}

// remoteBackend is a [[backend]] for a remote fixture; extra is more keys.
func remoteBackend(name string, f *testkit.RemoteFixture, extra string) string {
	return fmt.Sprintf("[[backend]]\nname = %q\nurl = %q\n%s\n\n", name, f.URL(), extra)
}

type backendsDoc struct {
	Backends []struct {
		Name            string `json:"name"`
		State           string `json:"state"`
		PID             int    `json:"pid"`
		Restarts        int    `json:"restarts"`
		LastError       string `json:"last_error"`
		Transport       string `json:"transport"`
		URL             string `json:"url"`
		ProtocolVersion string `json:"protocol_version"`
	} `json:"backends"`
}

func readBackends(t *testing.T, cs *mcp.ClientSession) backendsDoc {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
	if err != nil {
		t.Fatal(err)
	}
	var doc backendsDoc
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func callText(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %+v", tool, err, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func TestRemoteBackendsMergeWithAStdioOne(t *testing.T) {
	web := testkit.StartRemoteFixture(t, "-http", "-name", "web")
	old := testkit.StartRemoteFixture(t, "-sse", "-name", "old")
	cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\n\n"+stdioBackend(t, "local")+
		remoteBackend("web", web, "")+
		remoteBackend("old", old, `transport = "auto"`)) // falls back to HTTP+SSE
	r := runMux(t, cfg)
	ctx := context.Background()
	lt, err := r.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"local__echo", "web__echo", "web__publish", "old__echo", "old__publish"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	for _, b := range []string{"local", "web", "old"} {
		if got := callText(t, r.cs, b+"__echo", map[string]any{"text": "to " + b}); !strings.Contains(got, "to "+b) {
			t.Errorf("%s__echo answered %q", b, got)
		}
		uri := "fixture://" + b + "/res/1"
		res, err := r.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || res.Contents[0].Text != b+" resource 1" {
			t.Errorf("read %s: %v %+v", uri, err, res)
		}
	}
	want := map[string]string{"local": "stdio", "web": "streamable", "old": "sse"}
	for _, b := range readBackends(t, r.cs).Backends {
		if b.State != "ready" || b.Transport != want[b.Name] || b.ProtocolVersion != "2025-11-25" {
			t.Errorf("backend %s: state %q transport %q protocol %q, want ready %q 2025-11-25", b.Name, b.State, b.Transport, b.ProtocolVersion, want[b.Name])
		}
		if (b.PID == 0) != (b.Name != "local") {
			t.Errorf("backend %s: pid %d", b.Name, b.PID)
		}
	}

	out, code := runCheck(t, "--connect", "--config", cfg)
	if code != 0 {
		t.Fatalf("check --connect: exit %d\n%s", code, out)
	}
	for _, want := range []string{`transport\s+streamable`, `transport\s+sse`, `transport\s+stdio`, `url\s+` + regexp.QuoteMeta(web.URL()), `protocol\s+2025-11-25`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("check --connect lacks %s:\n%s", want, out)
		}
	}
}

// A subscription on a remote resource gets its updates, and is restored
// when the remote comes back after it went away: the new server process
// holds it (its own subscription tracking sends the update).
func TestRemoteSubscriptionSurvivesTheRemoteRestarting(t *testing.T) {
	for _, mode := range []string{"-http", "-sse"} {
		t.Run(mode, func(t *testing.T) {
			fx := testkit.StartRemoteFixture(t, mode, "-name", "web")
			cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\n\n"+stdioBackend(t, "local")+remoteBackend("web", fx, ""))
			w := startWire(t, cfg)
			updates := make(chan string, 100)
			c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updates <- r.Params.URI },
			})
			cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(w.out), Writer: nopClose{w.stdin}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, w.stderr)
			}
			const uri = "fixture://web/res/1"
			if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatal(err)
			}
			expectUpdate := func(when string) {
				t.Helper()
				callText(t, cs, "web__publish", map[string]any{"uri": uri})
				select {
				case got := <-updates:
					if got != uri {
						t.Fatalf("%s: update for %q", when, got)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: no update within 5s\nstderr:\n%s", when, w.stderr)
				}
			}
			expectUpdate("before the restart")

			fx.Restart() // the same port
			var b any
			if !testkit.Poll(20*time.Second, func() bool {
				web := readBackends(t, cs).Backends[1]
				b = web
				return web.State == "ready" && web.Restarts >= 1
			}) {
				t.Fatalf("web not reconnected within 20s: %+v\nstderr:\n%s", b, w.stderr)
			}
			var st struct {
				Subscribe map[string]int `json:"subscribe"`
			}
			json.Unmarshal([]byte(callText(t, cs, "web__stats", nil)), &st)
			if st.Subscribe[uri] != 1 {
				t.Errorf("the restarted remote holds subscriptions %v, want %s once", st.Subscribe, uri)
			}
			// The reconnect announces the URI once (its contents may have
			// changed while the remote was down): that update must be out
			// of the way, or it would pass for the one published below.
			select {
			case got := <-updates:
				if got != uri {
					t.Fatalf("the reconnect announced %q", got)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the reconnect did not announce %s within 5s\nstderr:\n%s", uri, w.stderr)
			}
			expectUpdate("after the restart")
		})
	}
}

func TestRemoteUnauthorizedBackendFailsWithoutRetrying(t *testing.T) {
	const token = "wr0ng-t0ken-e2e-4242"
	t.Setenv("E2E_REMOTE_TOKEN", token)
	fx := testkit.StartRemoteFixture(t, "-http", "-name", "web", "-require-token", "right")
	cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\nlog_level = \"debug\"\n\n"+stdioBackend(t, "local")+
		remoteBackend("web", fx, `headers = { Authorization = "Bearer ${E2E_REMOTE_TOKEN}" }`))
	r := runMux(t, cfg)
	want := "401 Unauthorized from " + fx.URL() + ": check the headers (token)"
	var web any
	if !testkit.Poll(10*time.Second, func() bool {
		b := readBackends(t, r.cs).Backends[1]
		web = b
		if b.State == "failed" && (!strings.Contains(b.LastError, want) || b.Restarts != 0) {
			t.Errorf("web: %+v, want the 401 and no restart", b)
		}
		return b.State == "failed"
	}) {
		t.Fatalf("web not failed within 10s: %+v", web)
	}
	testkit.Quiet(1500 * time.Millisecond) // a retry must not come; it would by now (backoff 0.5 s)
	if b := readBackends(t, r.cs).Backends[1]; b.State != "failed" || b.Restarts != 0 {
		t.Errorf("web retried after a 401: %+v (was %+v)", b, web)
	}
	if n := strings.Count(r.stderr.String(), "401 Unauthorized"); n == 0 || strings.Contains(r.stderr.String(), "restarting") {
		t.Errorf("stderr (%d mentions of the 401):\n%s", n, r.stderr)
	}

	out, code := runCheck(t, "--connect", "--config", cfg)
	if code != 1 || !regexp.MustCompile(`state\s+failed`).MatchString(out) || !strings.Contains(out, want) {
		t.Errorf("check --connect: exit %d, want 1 with the 401:\n%s", code, out)
	}
	if leaks(out, token) || leaks(r.stderr.String(), token) {
		t.Errorf("the token leaked:\ncheck:\n%s\nserve stderr:\n%s", out, r.stderr)
	}
}

func TestRemoteHeaderValueNeverInTheDebugLog(t *testing.T) {
	const token = "r1ght-t0ken-e2e-7777"
	t.Setenv("E2E_REMOTE_TOKEN", token)
	fx := testkit.StartRemoteFixture(t, "-http", "-name", "web", "-require-token", token)
	cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\nlog_level = \"debug\"\n\n"+
		remoteBackend("web", fx, `headers = { Authorization = "Bearer ${E2E_REMOTE_TOKEN}", X-Trace = "t" }`))
	r := runMux(t, cfg)
	if got := callText(t, r.cs, "web__echo", map[string]any{"text": "hi"}); !strings.Contains(got, "hi") {
		t.Errorf("echo answered %q", got)
	}
	r.cs.Close()
	r.stdin.Close()
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("mcp-mux did not exit on stdin EOF")
	}
	log := r.stderr.String()
	if !strings.Contains(log, "Authorization") || !strings.Contains(log, "X-Trace") {
		t.Errorf("the header names are not in the debug log:\n%s", log)
	}
	if leaks(log, token) {
		t.Errorf("the header value is in the debug log:\n%s", log)
	}
}

// A remote that stays away is reconnected to as a crashed child is
// restarted: with backoff, until restart_max, then failed.
func TestRemoteThatStaysGoneFailsAtTheCrashLoopLimit(t *testing.T) {
	fx := testkit.StartRemoteFixture(t, "-http", "-name", "web")
	cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\nrestart_max = 3\n\n"+stdioBackend(t, "local")+remoteBackend("web", fx, ""))
	r := runMux(t, cfg)
	callText(t, r.cs, "web__echo", map[string]any{"text": "x"})
	fx.Kill()
	var web any
	if !testkit.Poll(30*time.Second, func() bool {
		b := readBackends(t, r.cs).Backends[1]
		web = b
		if b.State == "failed" && (b.Restarts != 2 || !strings.Contains(strings.ToLower(b.LastError), "refused")) {
			t.Errorf("web: %+v, want 2 reconnects, then failed for the refused connection", b)
		}
		return b.State == "failed"
	}) {
		t.Fatalf("web not failed within 30s: %+v\nstderr:\n%s", web, r.stderr)
	}
	// The log line comes before the state, but reaches this test's copy
	// of stderr through a pipe of its own.
	for _, want := range []string{"connection lost", "backend down; restarting", "too many crashes"} {
		testkit.Eventually(t, 5*time.Second, "stderr to say "+want, func() bool { return strings.Contains(r.stderr.String(), want) })
	}
}

// What the remote asks of the client (roots, sampling) and tells it
// (progress) goes through mcp-mux as for a child backend.
func TestRemoteBackendRequestsAndProgressReachTheAgent(t *testing.T) {
	for _, mode := range []string{"-http", "-sse"} {
		t.Run(mode, func(t *testing.T) {
			fx := testkit.StartRemoteFixture(t, mode, "-name", "web", "-client-requests")
			cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\n\n"+remoteBackend("web", fx, ""))
			w := startWire(t, cfg)
			progress := make(chan float64, 100)
			c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
				CreateMessageWithToolsHandler: func(context.Context, *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
					return &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: "m", Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil
				},
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params.Progress },
			})
			c.AddRoots(&mcp.Root{URI: "file:///e2e"})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(w.out), Writer: nopClose{w.stdin}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, w.stderr)
			}
			for tool, want := range map[string]string{"web__sample": "pong model=m", "web__ask_roots": "file:///e2e"} {
				if got := callText(t, cs, tool, map[string]any{"prompt": "ping"}); got != want {
					t.Errorf("%s: got %q, want %q", tool, got, want)
				}
			}
			params := &mcp.CallToolParams{Name: "web__progress", Arguments: map[string]any{"steps": 3}}
			params.SetProgressToken("p1")
			if _, err := cs.CallTool(ctx, params); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				select {
				case <-progress:
				case <-time.After(2 * time.Second):
					t.Fatalf("%d of 3 progress notifications reached the agent", i)
				}
			}
		})
	}
}
