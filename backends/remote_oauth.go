package backends

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mcp-mux/mcp-mux/backends/oauth"
)

// OAuth for remote backends: the Streamable HTTP transport gets an
// oauth.Handler, which gives it the stored sign-in's tokens (refreshed)
// and says when a login is needed. Serving never signs in: that is
// `mcp-mux login NAME` (package oauth), in a terminal.

// setupOAuth gives r an OAuth handler unless the backend sends its own
// Authorization header. With auth = "oauth" and no sign-in stored, it is
// the error that a login is needed, before any request.
func (r *remote) setupOAuth(spec Spec) error {
	if hasAuthorization(spec.Headers) {
		return nil
	}
	s, err := oauth.Open()
	if err != nil {
		if spec.Auth == AuthOAuth {
			return err
		}
		return nil // no state directory: only servers without sign-in work
	}
	h := &oauth.Handler{
		Signins:   s,
		ServerURL: spec.URL,
		Name:      spec.Name,
		Explicit:  spec.Auth == AuthOAuth,
		// Token requests go to the authorization server, with the
		// environment's proxy settings, and never carry the backend's
		// headers.
		Client: &http.Client{Timeout: 30 * time.Second},
	}
	if spec.Auth == AuthOAuth {
		if err := h.NotSignedIn(); err != nil {
			return err
		}
	}
	r.oauth = h
	r.rt.oauth = true
	return nil
}

func hasAuthorization(headers map[string]string) bool {
	for k := range headers {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			return true
		}
	}
	return false
}

// SignedIn reports whether the backend signs in with OAuth and has a
// sign-in stored, and by which issuer.
func (b *Backend) SignedIn() (ok bool, issuer string) {
	b = b.real()
	if b.remote == nil || b.remote.oauth == nil {
		return false, ""
	}
	return b.remote.oauth.SignedIn()
}

// signInPoll is how often a backend that needs a login looks for one.
const signInPoll = time.Second

// WaitSignIn returns once the sign-in of spec's server changed after err
// (an ErrNeedsLogin from Start or Err) was decided: `mcp-mux login` in
// another terminal, or another process, stored one. It watches a small
// file the sign-in's store changes with each write (never the secret
// store itself), once a second. It returns ctx's error when ctx ends.
func WaitSignIn(ctx context.Context, spec Spec, err error) error {
	var nl *oauth.NeedsLoginError
	if !errors.As(err, &nl) {
		return errors.New("not waiting for a sign-in: the error is not a needed login")
	}
	s, oerr := oauth.Open()
	if oerr != nil {
		return oerr
	}
	return s.WaitChange(ctx, spec.URL, nl.Stamp, signInPoll)
}
