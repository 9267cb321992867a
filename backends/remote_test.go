package backends

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

func connectRemote(t *testing.T, spec Spec, opts Options) (*Backend, *testkit.SyncBuffer, error) {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	if opts.Logger == nil {
		opts.Logger = log.New(logs)
	}
	if opts.StartupTimeout == 0 {
		opts.StartupTimeout = 10 * time.Second
	}
	if spec.Name == "" {
		spec.Name = "rm"
	}
	b, err := Start(context.Background(), spec, opts)
	if b != nil {
		t.Cleanup(func() { b.Stop(time.Second) })
	}
	return b, logs, err
}

// fixtureRemote starts the fixture serving HTTP (mode: -http, -sse) and
// connects a remote backend to it over transport ("" for the default).
func fixtureRemote(t *testing.T, mode, transport string) *Backend {
	t.Helper()
	fx := testkit.StartRemoteFixture(t, mode, "-name", "rm")
	b, _, err := connectRemote(t, Spec{URL: fx.URL(), Transport: transport}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readText(t *testing.T, b *Backend, uri string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := b.Session().ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	return res.Contents[0].Text
}

func TestRemoteBackendSpeaksEachTransport(t *testing.T) {
	for _, tc := range []struct {
		mode, transport, want string
	}{
		{"-http", "", TransportStreamable},
		{"-http", TransportStreamable, TransportStreamable},
		{"-sse", TransportSSE, TransportSSE},
		// The spec's backwards compatibility: the POST of initialize is
		// refused (400 from the go-sdk's SSE handler), the GET opens the
		// old transport's stream.
		{"-sse", TransportAuto, TransportSSE},
	} {
		t.Run(tc.mode+"/"+tc.transport, func(t *testing.T) {
			fx := testkit.StartRemoteFixture(t, tc.mode, "-name", "rm")
			b, _, err := connectRemote(t, Spec{URL: fx.URL(), Transport: tc.transport}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Transport(); got != tc.want {
				t.Errorf("Transport() = %q, want %q", got, tc.want)
			}
			if r := b.InitializeResult(); r.ServerInfo.Name != "rm" || r.ProtocolVersion != ProtocolVersion {
				t.Errorf("initialize result: %+v", r)
			}
			if b.PID() != 0 {
				t.Errorf("PID() = %d for a remote backend", b.PID())
			}
			res, err := call(t, b, "echo", map[string]any{"text": "over http"})
			if err != nil || res.IsError {
				t.Fatalf("echo: %v %+v", err, res)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, "over http") {
				t.Errorf("echo answered %q", got)
			}
			if got := readText(t, b, "fixture://rm/res/2"); got != "rm resource 2" {
				t.Errorf("read answered %q", got)
			}
		})
	}
}

func TestRemoteStreamableDoesNotFallBackToSSE(t *testing.T) {
	fx := testkit.StartRemoteFixture(t, "-sse", "-name", "rm")
	_, _, err := connectRemote(t, Spec{URL: fx.URL(), Transport: TransportStreamable}, Options{})
	if err == nil || !strings.Contains(err.Error(), "Bad Request") {
		t.Fatalf("err = %v, want the refused POST", err)
	}
}

func TestRemoteHeadersReachTheServerAndAreNeverLogged(t *testing.T) {
	const token = "s3cr3t-t0ken-value"
	fx := testkit.StartRemoteFixture(t, "-http", "-name", "rm", "-require-token", token)
	logs := &testkit.SyncBuffer{}
	logger := log.New(logs)
	logger.SetLevel(log.DebugLevel)
	b, _, err := connectRemote(t, Spec{URL: fx.URL(), Headers: map[string]string{"Authorization": "Bearer " + token}},
		Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, b, "echo", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	b.Stop(time.Second)
	if !strings.Contains(logs.String(), "Authorization") {
		t.Errorf("the header's name is not logged:\n%s", logs)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the header's value is logged:\n%s", logs)
	}
}

func TestRemoteWrongTokenIsUnauthorizedNotACrash(t *testing.T) {
	const token = "the-wrong-one-0123"
	for _, tc := range []struct{ mode, transport string }{
		{"-http", ""}, {"-http", TransportStreamable}, {"-sse", TransportSSE},
	} {
		t.Run(tc.mode+"/"+tc.transport, func(t *testing.T) {
			fx := testkit.StartRemoteFixture(t, tc.mode, "-name", "rm", "-require-token", "right")
			_, logs, err := connectRemote(t, Spec{URL: fx.URL(), Transport: tc.transport,
				Headers: map[string]string{"Authorization": "Bearer " + token}}, Options{})
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("err = %v, want ErrUnauthorized", err)
			}
			want := "401 Unauthorized from " + fx.URL() + ": check the headers (token)"
			if !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to say %q", err, want)
			}
			if strings.Contains(err.Error()+logs.String(), token) {
				t.Errorf("the token is in the error or the log: %v\n%s", err, logs)
			}
		})
	}
}

// oauthServer answers every request as an MCP server that wants an OAuth
// sign-in does (RFC 9728's resource_metadata).
func oauthServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://`+r.Host+`/.well-known/oauth-protected-resource"`)
		http.Error(w, "sign in", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A server that asks for an OAuth sign-in, where none is stored, leaves
// the backend waiting for one: the error names the command to run.
func TestRemoteOAuthServerNeedsALogin(t *testing.T) {
	srv := oauthServer(t)
	_, _, err := connectRemote(t, Spec{Name: "web", URL: srv.URL + "/mcp"}, Options{})
	if !errors.Is(err, ErrNeedsLogin) || errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrNeedsLogin", err)
	}
	if want := "needs a sign-in (not signed in): run `mcp-mux login web` in a terminal"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

// With a token in headers, the server's refusal is about that token.
func TestRemoteOAuthServerRefusingAHeaderTokenSaysSo(t *testing.T) {
	srv := oauthServer(t)
	_, _, err := connectRemote(t, Spec{Name: "web", URL: srv.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer x"}}, Options{})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	if want := "the token in headers was refused; this server signs in with OAuth: remove the Authorization header and run `mcp-mux login web`"; !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want it to say %q", err, want)
	}
}

// auth = "oauth" without a sign-in does not even ask the server.
func TestRemoteExplicitOAuthWithoutASignInAsksNothing(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Add(1) }))
	t.Cleanup(srv.Close)
	_, _, err := connectRemote(t, Spec{Name: "web", URL: srv.URL + "/mcp", Auth: AuthOAuth}, Options{})
	if !errors.Is(err, ErrNeedsLogin) || asked.Load() != 0 {
		t.Fatalf("err = %v after %d requests, want ErrNeedsLogin after none", err, asked.Load())
	}
}

// inProcessServer is a go-sdk MCP server behind a Streamable HTTP handler in
// the test process, with the requests it got (method and path) and a switch
// that makes it answer 401 from then on.
type inProcessServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	refuse   atomic.Bool
}

func newInProcessServer(t *testing.T) *inProcessServer {
	s := &inProcessServer{}
	server := mcp.NewServer(&mcp.Implementation{Name: "inproc", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "hello"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		if s.refuse.Load() {
			http.Error(w, "token revoked", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *inProcessServer) got(req string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		if r == req {
			return true
		}
	}
	return false
}

func TestRemoteStopEndsTheSession(t *testing.T) {
	srv := newInProcessServer(t)
	b, logs, err := connectRemote(t, Spec{URL: srv.URL + "/mcp"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b.Stop(time.Second)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Stop took %s", took)
	}
	if !srv.got("DELETE /mcp") {
		t.Errorf("no DELETE: the server keeps the session (requests: %v)", srv.requests)
	}
	if !errors.Is(b.Err(), ErrStopped) {
		t.Errorf("Err() = %v, want ErrStopped", b.Err())
	}
	if strings.Contains(logs.String(), "backend down") {
		t.Errorf("a stop is logged as a failure:\n%s", logs)
	}
}

// callWays are the two ways mux calls a backend: through the go-sdk's
// session, and as bytes (rawcall.go).
var callWays = []struct {
	name string
	call func(ctx context.Context, b *Backend, tool string, args string) error
}{
	{"typed", func(ctx context.Context, b *Backend, tool string, args string) error {
		var a map[string]any
		_ = json.Unmarshal([]byte(args), &a)
		_, err := b.Session().CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: a})
		return err
	}},
	{"raw", func(ctx context.Context, b *Backend, tool string, args string) error {
		_, err := b.CallRaw(ctx, "tools/call", json.RawMessage(`{"name":"`+tool+`","arguments":`+args+`}`))
		return err
	}},
}

func TestRemoteKillEndsCallsInFlightAtOnce(t *testing.T) {
	for _, way := range callWays {
		t.Run(way.name, func(t *testing.T) {
			b := fixtureRemote(t, "-http", "")
			failed := make(chan error, 1)
			called := arrived(t, b)
			go func() { failed <- way.call(context.Background(), b, "hang", `{}`) }()
			testkit.Eventually(t, 5*time.Second, "the call to be at the server", called)
			reason := errors.New("hung on purpose")
			start := time.Now()
			b.Kill(reason)
			select {
			case <-b.Done():
			case <-time.After(2 * time.Second):
				t.Fatal("not down 2s after Kill")
			}
			select {
			case err := <-failed:
				if err == nil {
					t.Error("the call in flight succeeded")
				}
			case <-time.After(2 * time.Second):
				t.Fatal("the call in flight still waits 2s after Kill")
			}
			t.Logf("down and the call failed %s after Kill", time.Since(start))
			if !errors.Is(b.Err(), reason) {
				t.Errorf("Err() = %v, want the kill's reason", b.Err())
			}
			if err := way.call(context.Background(), b, "echo", `{}`); err == nil {
				t.Error("a call after Kill succeeded")
			}
		})
	}
}

func TestRemoteGoneIsConnectionLost(t *testing.T) {
	for _, mode := range []string{"-http", "-sse"} {
		t.Run(mode, func(t *testing.T) {
			fx := testkit.StartRemoteFixture(t, mode, "-name", "rm")
			b, _, err := connectRemote(t, Spec{URL: fx.URL(), Transport: TransportAuto}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			fx.Kill()
			select {
			case <-b.Done():
			case <-time.After(15 * time.Second):
				t.Fatal("still up 15s after the server died")
			}
			t.Logf("down %s after the server died: %v", time.Since(start), b.Err())
			if err := b.Err(); err == nil || !strings.Contains(err.Error(), "connection lost") {
				t.Errorf("Err() = %v, want connection lost", err)
			}
		})
	}
}

func TestRemoteTokenRevokedLaterTakesTheBackendDownAsUnauthorized(t *testing.T) {
	srv := newInProcessServer(t)
	b, _, err := connectRemote(t, Spec{URL: srv.URL + "/mcp"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv.refuse.Store(true)
	if _, err := call(t, b, "hello", nil); err == nil {
		t.Fatal("a call answered 401 succeeded")
	}
	select {
	case <-b.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("still up 2s after a 401")
	}
	if !errors.Is(b.Err(), ErrUnauthorized) || !strings.Contains(b.Err().Error(), "401 Unauthorized from "+srv.URL+"/mcp") {
		t.Errorf("Err() = %v, want the 401", b.Err())
	}
}

// Notifications the server sent before its response have reached their
// hooks once Settle returns, as for a child backend.
func TestRemoteSettleWaitsForNotificationsSentBeforeTheResponse(t *testing.T) {
	fx := testkit.StartRemoteFixture(t, "-http", "-name", "rm")
	var handled atomic.Int64
	b, _, err := connectRemote(t, Spec{URL: fx.URL()}, Options{Hooks: Hooks{ResourceUpdated: func(*mcp.ResourceUpdatedNotificationParams) {
		// Pacing, not a wait: a handler slower than the reader, so that
		// Settle has notifications to wait for. Shorter, it would only
		// leave fewer of them unhandled when the response comes; the
		// count checked after Settle is exact either way.
		time.Sleep(time.Millisecond)
		handled.Add(1)
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, b, "update", map[string]any{"uri": "fixture://rm/res/1", "count": 200}); err != nil {
		t.Fatal(err)
	}
	at := handled.Load()
	b.Settle(5 * time.Second)
	if n := handled.Load(); n != 200 {
		t.Errorf("%d of 200 notifications handled after Settle (%d when the response came)", n, at)
	}
}

// A call cancelled while the tool works: the go-sdk's POST is still
// waiting for its response's headers then (its server sends them once it
// has something to say), and the notifications/cancelled must go all the
// same, with the reason.
func TestRemoteCancelCarriesTheReason(t *testing.T) {
	for _, way := range callWays {
		t.Run(way.name, func(t *testing.T) {
			b := fixtureRemote(t, "-http", "")
			ctx, cancel := context.WithTimeout(WithCancelReason(context.Background(), func() string { return "the agent gave up" }), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			if err := way.call(ctx, b, "sleep", `{"ms":5000}`); err == nil {
				t.Fatal("the cancelled call succeeded")
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("the cancelled call returned after %s", took)
			}
			var text string
			if !testkit.Poll(5*time.Second, func() bool {
				res, err := call(t, b, "stats", nil)
				if err != nil {
					t.Fatal(err)
				}
				text = res.Content[0].(*mcp.TextContent).Text
				return strings.Contains(text, "the agent gave up")
			}) {
				t.Fatalf("the reason did not reach the server: %s", text)
			}
		})
	}
}

// A header goes to the configured origin only: a redirect elsewhere must
// not take the token with it.
func TestRemoteHeadersGoToTheConfiguredOriginOnly(t *testing.T) {
	const token = "never-elsewhere-42"
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), token) {
			leaked.Store(true)
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer other.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	_, _, err := connectRemote(t, Spec{URL: redirect.URL + "/mcp", Transport: TransportStreamable,
		Headers: map[string]string{"Authorization": "Bearer " + token}}, Options{})
	if err == nil {
		t.Fatal("connected through a redirect to a 404")
	}
	if leaked.Load() {
		t.Error("the Authorization header followed the redirect to another origin")
	}
}

// TestRemoteThatCannotBeReachedSaysWhyInOneSentence: the go-sdk's chain
// ("backend remote: connecting to URL: calling "initialize": sending
// "initialize": rejected by transport: Post "URL": dial tcp ...: connect:
// connection refused") is one sentence with the cause, naming no backend
// (the caller does, once).
func TestRemoteThatCannotBeReachedSaysWhyInOneSentence(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	ln.Close() // nothing listens there now
	_, _, err = connectRemote(t, Spec{Name: "remote", URL: url}, Options{StartupTimeout: 5 * time.Second})
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	want := "cannot connect to " + url + ": connection refused"
	if runtime.GOOS == "windows" {
		// Its own words, as one clause: "... actively refused it".
		if got := err.Error(); !strings.HasPrefix(got, "cannot connect to "+url+": ") || strings.HasSuffix(got, ".") ||
			!strings.Contains(strings.ToLower(got), "refused") || strings.ContainsAny(got[len("cannot connect to "+url+": "):][:1], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			t.Errorf("error %q, want %q in Windows' words, as the end of the sentence", got, want)
		}
	} else if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
