package oauth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/secrets"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func testSignins(t *testing.T, dir string) *Signins {
	if dir == "" {
		dir = t.TempDir()
	}
	return &Signins{Store: &secrets.FileStore{Dir: filepath.Join(dir, "secrets")}, Dir: dir}
}

// follow is a browser that goes where the authorization URL leads, and
// reports the page it ends on.
func follow(t *testing.T, pages chan<- string) func(string) error {
	return func(u string) error {
		go func() {
			resp, err := http.Get(u)
			if err != nil {
				pages <- "error: " + err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			pages <- fmt.Sprintf("%d %s", resp.StatusCode, body)
		}()
		return nil
	}
}

// sayTo is a LoginOptions.Say that writes to w.
func sayTo(w io.Writer) func(string) { return func(msg string) { io.WriteString(w, msg) } }

func login(t *testing.T, s *Signins, srv *testkit.OAuthServer, out io.Writer) *Record {
	t.Helper()
	pages := make(chan string, 1)
	rec, err := Login(testkit.CtxT(t), s, LoginOptions{Name: "web", ServerURL: srv.URL(), Say: sayTo(out), Open: follow(t, pages), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	select {
	case p := <-pages:
		if !strings.HasPrefix(p, "200 ") || !strings.Contains(p, "Signed in to web. You can close this tab.") {
			t.Errorf("the browser ended on %q", p)
		}
	case <-time.After(5 * time.Second):
		t.Error("the browser got no page")
	}
	return rec
}

// Login runs the whole authorization code flow against a server on
// another origin than its authorization server, and stores the tokens
// with the issuer and the dynamic registration they belong to.
func TestLoginStoresTheTokensWithTheirIssuerAndRegistration(t *testing.T) {
	srv := testkit.StartOAuthServer(t, "web", time.Hour)
	s := testSignins(t, "")
	var out bytes.Buffer
	rec := login(t, s, srv, &out)
	got, err := s.Load(srv.URL())
	if err != nil || got == nil {
		t.Fatalf("nothing stored: %v", err)
	}
	if got.Issuer != srv.AS.URL || got.Registration != "dynamic" || got.ClientID == "" || got.TokenURL != srv.AS.URL+"/token" ||
		got.Resource != srv.URL() || got.Token.AccessToken != rec.Token.AccessToken || got.Token.RefreshToken == "" {
		t.Errorf("stored %+v", got)
	}
	if !strings.Contains(out.String(), srv.AS.URL+"/authorize?") || !strings.Contains(out.String(), "http://127.0.0.1:") {
		t.Errorf("the URL is not on the output:\n%s", out.String())
	}
	for _, secret := range srv.Issued() {
		if strings.Contains(out.String(), secret) {
			t.Errorf("a token is on the output:\n%s", out.String())
		}
	}
	// A serving handler uses it: the server answers.
	h := &Handler{Signins: s, ServerURL: srv.URL(), Name: "web"}
	cs := connect(t, srv, h)
	callEcho(t, cs)
}

func connect(t *testing.T, srv *testkit.OAuthServer, h *Handler) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.StreamableClientTransport{Endpoint: srv.URL(), OAuthHandler: h, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callEcho(t *testing.T, cs *mcp.ClientSession) error {
	t.Helper()
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err == nil && res.IsError {
		err = errors.New("tool error")
	}
	return err
}

// A token about to expire is refreshed before it is sent, the rotated
// refresh token is stored, and the old one is not used again.
func TestTokenIsRefreshedBeforeItExpiresAndTheRotationStored(t *testing.T) {
	srv := testkit.StartOAuthServer(t, "web", 2*time.Second)
	s := testSignins(t, "")
	first := login(t, s, srv, io.Discard)
	h := &Handler{Signins: s, ServerURL: srv.URL(), Name: "web"}
	cs := connect(t, srv, h)
	if err := callEcho(t, cs); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the token nears its expiry", func() bool {
		return time.Until(first.Token.Expiry) < 250*time.Millisecond
	})
	if err := callEcho(t, cs); err != nil {
		t.Fatalf("a call with a token about to expire: %v", err)
	}
	if n := srv.TokenRequests("refresh_token"); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	rec, _ := s.Load(srv.URL())
	if rec.Token.RefreshToken == first.Token.RefreshToken || rec.Token.AccessToken == first.Token.AccessToken {
		t.Errorf("the rotated tokens were not stored")
	}
	if srv.Revoked() {
		t.Error("a refresh token was used twice")
	}
}

// Two processes (two handlers with their own view of the store) that need
// a refresh at once refresh once: the second takes the token the first
// stored, so a rotating refresh token is never used twice.
func TestTwoHoldersOfOneSignInRefreshOnce(t *testing.T) {
	srv := testkit.StartOAuthServer(t, "web", 2*time.Second)
	dir := t.TempDir()
	first := login(t, testSignins(t, dir), srv, io.Discard)
	var hs []*Handler
	for range 4 {
		hs = append(hs, &Handler{Signins: testSignins(t, dir), ServerURL: srv.URL(), Name: "web"})
	}
	for _, h := range hs {
		if tok, err := h.Token(); err != nil || tok.AccessToken != first.Token.AccessToken {
			t.Fatalf("before the refresh: %v", err)
		}
	}
	testkit.Eventually(t, 5*time.Second, "the token nears its expiry", func() bool {
		return time.Until(first.Token.Expiry) < 250*time.Millisecond
	})
	var wg sync.WaitGroup
	toks := make([]string, len(hs))
	for i, h := range hs {
		wg.Go(func() {
			tok, err := h.Token()
			if err != nil {
				t.Errorf("handler %d: %v", i, err)
				return
			}
			toks[i] = tok.AccessToken
		})
	}
	wg.Wait()
	if n := srv.TokenRequests("refresh_token"); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	for i, tok := range toks {
		if tok != toks[0] || tok == first.Token.AccessToken {
			t.Errorf("handler %d has another token than handler 0, or the old one", i)
		}
	}
	if srv.Revoked() {
		t.Error("a refresh token was used twice")
	}
}

// A server that forgot the sign-in (it restarted) refuses the token and
// the refresh: the handler says a login is needed, naming the command,
// and calls OnLost; it does not refresh at every request after that.
func TestForgottenSignInNeedsALogin(t *testing.T) {
	srv := testkit.StartOAuthServer(t, "web", time.Hour)
	s := testSignins(t, "")
	login(t, s, srv, io.Discard)
	rec, _ := s.Load(srv.URL())
	rec.Obtained = rec.Obtained.Add(-time.Minute) // not just issued
	s.Save(rec)
	h := &Handler{Signins: s, ServerURL: srv.URL(), Name: "web"}
	cs := connect(t, srv, h)
	lost := make(chan error, 4)
	h.OnLost(func(err error) { lost <- err })
	srv.Forget()
	err := callEcho(t, cs)
	if !errors.Is(err, ErrNeedsLogin) {
		t.Fatalf("call after the server forgot: %v, want ErrNeedsLogin", err)
	}
	select {
	case err := <-lost:
		if !strings.Contains(err.Error(), "run `mcp-mux login web`") || !strings.Contains(err.Error(), "invalid_grant") {
			t.Errorf("OnLost got %q", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnLost was not called")
	}
	callEcho(t, cs)
	if n := srv.TokenRequests("refresh_token"); n != 1 {
		t.Errorf("%d refreshes, want 1: a refused refresh is not tried again", n)
	}
}

// The redirect listener takes only the request with the sign-in's state:
// another gets an error page and changes nothing; the right one gets the
// "signed in" page, and the listener closes.
func TestRedirectListenerTakesOnlyItsState(t *testing.T) {
	s := testSignins(t, "")
	srv := testkit.StartOAuthServer(t, "web", time.Hour)
	var redirect string
	opened := make(chan string, 1)
	open := func(u string) error {
		pu, _ := url.Parse(u)
		redirect = pu.Query().Get("redirect_uri")
		opened <- u
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := Login(testkit.CtxT(t), s, LoginOptions{Name: "web", ServerURL: srv.URL(), Open: open, Timeout: 20 * time.Second})
		done <- err
	}()
	var authURL string
	select {
	case authURL = <-opened:
	case <-time.After(10 * time.Second):
		t.Fatal("the authorization URL was not opened")
	}
	resp, err := http.Get(redirect + "?code=stolen&state=guessed")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "Not the sign-in") {
		t.Errorf("a wrong state got %d %s", resp.StatusCode, body)
	}
	// The real browser comes back: that one counts.
	resp, err = http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("login did not finish")
	}
	if _, err := http.Get(redirect + "?code=x&state=y"); err == nil {
		t.Error("the redirect listener still listens after the sign-in")
	}
}

// A browser that never comes back ends the login at its timeout, with a
// message that says so and what to run.
func TestLoginTimesOut(t *testing.T) {
	srv := testkit.StartOAuthServer(t, "web", time.Hour)
	_, err := Login(testkit.CtxT(t), testSignins(t, ""), LoginOptions{Name: "web", ServerURL: srv.URL(), Open: func(string) error { return nil }, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "no sign-in within 1s") || !strings.Contains(err.Error(), `"mcp-mux login web"`) {
		t.Fatalf("err = %v", err)
	}
}

// $BROWSER is a list of commands: one that fails is skipped for the
// next, and "%s" in one is where the URL goes.
func TestOpenBrowserUsesBROWSER(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "opened")
	t.Setenv("BROWSER", filepath.Join(t.TempDir(), "no-such-browser")+string(os.PathListSeparator)+testkit.BrowserBin(t)+" -record "+rec+" %s")
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "sign in here") }))
	defer page.Close()
	u := page.URL + "/authorize?a=b&c=d"
	if err := OpenBrowser(u); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the stand-in was given the URL", func() bool {
		data, _ := os.ReadFile(rec)
		return string(data) == u+"\n200\nsign in here"
	})
}

// A token endpoint that refuses the code, echoing what it was sent, is
// told by its error code: the echo (the code, the verifier) is not.
func TestRefusedCodeIsToldWithoutTheEcho(t *testing.T) {
	srv := testkit.StartOAuthServer(t, "web", time.Hour)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"invalid_grant","error_description":"bad code %s verifier %s"}`, r.PostForm.Get("code"), r.PostForm.Get("code_verifier"))
	}))
	defer echo.Close()
	// The authorization server's metadata points its token endpoint at
	// the echo: the metadata client's requests are rewritten on the way.
	var codes []string
	pages := make(chan string, 1)
	open := func(u string) error {
		go func() {
			c := &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
				codes = append(codes, req.URL.Query().Get("code"))
				return nil
			}}
			resp, err := c.Get(u)
			if err == nil {
				resp.Body.Close()
			}
			pages <- "done"
		}()
		return nil
	}
	s := testSignins(t, "")
	srv.TokenEndpoint = echo.URL + "/token"
	var out bytes.Buffer
	_, err := Login(testkit.CtxT(t), s, LoginOptions{Name: "web", ServerURL: srv.URL(), Open: open, Timeout: 20 * time.Second, Say: sayTo(&out)})
	<-pages
	if n := strings.Count(out.String(), "To sign in to web"); n != 1 {
		t.Errorf("%d sign-ins were started, want 1:\n%s", n, out.String())
	}
	if err == nil || !strings.Contains(err.Error(), "refused the authorization code with invalid_grant (HTTP 400)") {
		t.Fatalf("err = %v", err)
	}
	for _, c := range codes {
		if c != "" && strings.Contains(err.Error(), c) {
			t.Errorf("the code is in the error: %v", err)
		}
	}
	if strings.Contains(err.Error(), "verifier") {
		t.Errorf("the echo is in the error: %v", err)
	}
}

// A sign-in writes to no stream of the process: what it says goes to Say,
// the caller's. stdout is the protocol stream when mcp-mux serves.
func TestLoginWritesToNoStream(t *testing.T) {
	srv := testkit.StartOAuthServer(t, "web", time.Hour)
	s := testSignins(t, "")
	var said strings.Builder
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outW, errW
	rec := login(t, s, srv, &said)
	os.Stdout, os.Stderr = stdout, stderr
	outW.Close()
	errW.Close()
	wrote, _ := io.ReadAll(outR)
	wroteErr, _ := io.ReadAll(errR)
	if rec == nil || !strings.Contains(said.String(), "To sign in to web") {
		t.Fatalf("the sign-in said %q", said.String())
	}
	if len(wrote) > 0 || len(wroteErr) > 0 {
		t.Errorf("the sign-in wrote to stdout %q and to stderr %q", wrote, wroteErr)
	}
}
