package backends

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcp-mux/mcp-mux/backends/oauth"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// signIn runs mcp-mux login's flow against srv, with a browser that
// follows the redirects, into a state directory of the test's own.
func signIn(t *testing.T, srv *testkit.OAuthServer, name string) {
	t.Helper()
	s, err := oauth.Open()
	if err != nil {
		t.Fatal(err)
	}
	open := func(u string) error {
		go func() {
			if resp, err := http.Get(u); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		return nil
	}
	if _, err := oauth.Login(testkit.CtxT(t), s, oauth.LoginOptions{Name: name, ServerURL: srv.URL(), Open: open, Timeout: 20 * time.Second}); err != nil {
		t.Fatalf("login: %v", err)
	}
}

func ownStateDir(t *testing.T) {
	t.Setenv("MCP_MUX_SECRET_STORE", "file")
	t.Setenv("MCP_MUX_STATE_DIR", filepath.Join(t.TempDir(), "state"))
}

// A remote backend whose server signs in: without a sign-in it needs a
// login; WaitSignIn returns when one is stored, and the backend then
// connects with it. When the server forgets the sign-in (it restarted),
// the backend goes down needing a login again, not as a crash.
func TestRemoteOAuthBackendWaitsForALoginAndLosesAForgottenOne(t *testing.T) {
	ownStateDir(t)
	srv := testkit.StartOAuthServer(t, "web", time.Hour)
	spec := Spec{Name: "web", URL: srv.URL()}
	_, _, err := connectRemote(t, spec, Options{})
	if !errors.Is(err, ErrNeedsLogin) {
		t.Fatalf("before the login: %v, want ErrNeedsLogin", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- WaitSignIn(testkit.CtxT(t), spec, err) }()
	signIn(t, srv, "web")
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitSignIn did not see the login")
	}
	b, _, err := connectRemote(t, spec, Options{})
	if err != nil {
		t.Fatalf("after the login: %v", err)
	}
	if ok, iss := b.SignedIn(); !ok || iss != srv.AS.URL {
		t.Errorf("SignedIn() = %v, %q", ok, iss)
	}
	if res, err := call(t, b, "echo", map[string]any{"text": "hi"}); err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	// The sign-in is no longer "just issued" (a token refused then is
	// not refreshed at all): the refresh is tried, and refused.
	s, _ := oauth.Open()
	rec, _ := s.Load(srv.URL())
	rec.Obtained = rec.Obtained.Add(-time.Minute)
	s.Save(rec)
	srv.Forget()
	if _, err := call(t, b, "echo", map[string]any{"text": "again"}); err == nil {
		t.Error("a call with a forgotten token succeeded")
	}
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("still up 5s after the server forgot the sign-in")
	}
	if !errors.Is(b.Err(), ErrNeedsLogin) || !strings.Contains(b.Err().Error(), "run `mcp-mux login web`") {
		t.Errorf("Err() = %v, want a needed login", b.Err())
	}
}

// A resource server whose token check fails on the token sent, and which
// says so with a 500 that carries an OAuth error (the TypeScript SDK's
// bearer middleware, for a token its server forgot), refused the token:
// with no refresh token, the backend needs a login. A 500 that is not an
// OAuth error is the server's own failure.
func TestRemoteTokenTheServerCannotVerifyNeedsALogin(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		needsLogin bool
	}{
		{"oauth error", `{"error":"server_error","error_description":"Internal Server Error"}`, true},
		{"json-rpc error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ownStateDir(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			s, err := oauth.Open()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Save(&oauth.Record{ServerURL: srv.URL + "/mcp", ClientID: "c", TokenURL: srv.URL + "/token",
				Token: &oauth2.Token{AccessToken: "forgotten"}, Obtained: time.Now().Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
			_, _, err = connectRemote(t, Spec{Name: "web", URL: srv.URL + "/mcp", Transport: TransportStreamable}, Options{})
			if errors.Is(err, ErrNeedsLogin) != tc.needsLogin {
				t.Errorf("err = %v, needs login: want %v", err, tc.needsLogin)
			}
		})
	}
}

// The sign-in's token goes to its own server only: a redirect to another
// origin (another port of the same host here, which Go's client would
// otherwise send it to) arrives without it.
func TestRemoteTokenIsNotSentAcrossARedirect(t *testing.T) {
	ownStateDir(t)
	got := make(chan string, 1)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get("Authorization"):
		default:
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(elsewhere.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	s, err := oauth.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&oauth.Record{ServerURL: srv.URL + "/mcp", ClientID: "c", TokenURL: srv.URL + "/token",
		Token: &oauth2.Token{AccessToken: "t0ken-for-its-own-server"}, Obtained: time.Now()}); err != nil {
		t.Fatal(err)
	}
	connectRemote(t, Spec{Name: "web", URL: srv.URL + "/mcp", Transport: TransportStreamable}, Options{})
	select {
	case auth := <-got:
		if auth != "" {
			t.Errorf("the other origin got Authorization %q", auth)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the redirect was not followed")
	}
}
