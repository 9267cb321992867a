package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// ErrNeedsLogin is wrapped by the error of a remote backend that has no
// sign-in that its server accepts: the user must run `mcp-mux login NAME`.
// Serving never starts a sign-in (the agent launches mcp-mux headless).
var ErrNeedsLogin = errors.New("needs a sign-in")

// NeedsLoginError is ErrNeedsLogin for one backend, with why.
type NeedsLoginError struct {
	Name   string // the backend
	Reason string // one clause, no secret: "not signed in", "the refresh token was refused (invalid_grant)"
	// Stamp is the sign-in's stamp (Signins.Stamp) the decision was
	// made on: a login after it changes it (see WaitChange).
	Stamp string
}

func (e *NeedsLoginError) Error() string {
	return fmt.Sprintf("needs a sign-in (%s): run `mcp-mux login %s` in a terminal", e.Reason, e.Name)
}

func (e *NeedsLoginError) Unwrap() error { return ErrNeedsLogin }

// Command is what the user runs to sign backend name in.
func Command(name string) string { return "mcp-mux login " + name }

// early is how long before its expiry a token is refreshed: a request
// must not leave with a token that expires on the way.
const early = 30 * time.Second

// freshFor is how young a token the server refuses must be for a refresh
// to be pointless: it was just issued, so the server does not take the
// sign-in any more (a server that forgot it, a revoked grant), and trying
// again at each request would be a storm of refreshes.
const freshFor = 10 * time.Second

// refreshTimeout bounds one refresh request.
const refreshTimeout = 30 * time.Second

// Handler gives a serving remote backend its server's tokens, from the
// stored sign-in: it is the go-sdk's auth.OAuthHandler of the backend's
// Streamable HTTP transport. It refreshes a token before it expires, and
// when the server refuses one; Authorize never starts a sign-in, it says
// that one is needed (NeedsLoginError), and calls OnLost once connected.
type Handler struct {
	Signins   *Signins
	ServerURL string
	Name      string // the backend's, for the command in errors
	// Client makes the refresh requests (to the authorization server).
	Client *http.Client

	mu     sync.Mutex
	rec    *Record
	stamp  string // the stamp rec was read at
	loaded bool
	// refused is the access token whose refresh the authorization
	// server refused: a 401 for it needs a login, not another refresh.
	refused   string
	onLost    func(error)
	published atomic.Pointer[signState]
	// Explicit: the backend is configured to sign in (auth = "oauth").
	// Otherwise a 401 asks for a sign-in only when it points to the
	// server's resource metadata, or a sign-in is stored; any other 401
	// is not the handler's (ErrNotOAuth).
	Explicit bool
	// Now is the clock (tests).
	Now func() time.Time
}

// ErrNotOAuth is what Authorize says of a 401 that does not ask for an
// OAuth sign-in (a server that wants another token).
var ErrNotOAuth = errors.New("the server refused the request without asking for an OAuth sign-in")

// NotSignedIn is the error of a backend that has no sign-in stored, if
// it has none (nil otherwise).
func (h *Handler) NotSignedIn() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.reloadLocked(); err != nil {
		return err
	}
	if h.rec != nil {
		return nil
	}
	return &NeedsLoginError{Name: h.Name, Reason: "not signed in", Stamp: h.stamp}
}

// WaitChange returns when serverURL's stamp is no longer since (a login,
// a logout, a refresh by another process), or with ctx's error; it reads
// the stamp every interval.
func (s *Signins) WaitChange(ctx context.Context, serverURL, since string, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if s.Stamp(serverURL) != since {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

var _ auth.OAuthHandler = (*Handler)(nil)

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// OnLost sets what a refused sign-in does once connected (take the
// backend down, to wait for a login).
func (h *Handler) OnLost(f func(error)) {
	h.mu.Lock()
	h.onLost = f
	h.mu.Unlock()
}

// SignedIn reports whether a sign-in is stored for the server, as last
// read, and by which issuer. It neither asks a store nor waits for a
// refresh in progress: status pages call it holding their own locks.
func (h *Handler) SignedIn() (bool, string) {
	if p := h.published.Load(); p != nil {
		return p.signedIn, p.issuer
	}
	return false, ""
}

// signState is what SignedIn says.
type signState struct {
	signedIn bool
	issuer   string
}

func (h *Handler) publishLocked() {
	st := &signState{}
	if h.rec != nil {
		st.signedIn, st.issuer = true, h.rec.Issuer
	}
	h.published.Store(st)
}

// reloadLocked reads the record again if its stamp changed since it was
// last read (a login, a logout, another process's refresh): the stamp is a
// small file, the store may be a keychain.
func (h *Handler) reloadLocked() error {
	stamp := h.Signins.Stamp(h.ServerURL)
	if h.loaded && stamp == h.stamp {
		return nil
	}
	var rec *Record
	if stamp != "" {
		// Without a stamp nothing was ever stored: the store (a
		// keychain, maybe) is not asked at each start of every remote
		// backend of a user who never signed in.
		var err error
		if rec, err = h.Signins.Load(h.ServerURL); err != nil {
			return err
		}
	}
	h.rec, h.stamp, h.loaded = rec, stamp, true
	h.publishLocked()
	return nil
}

// TokenSource is h itself once a sign-in is stored, else nil: a request
// then goes without a token, and a server that wants one says so.
func (h *Handler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.reloadLocked(); err != nil {
		return nil, err
	}
	if h.rec == nil {
		return nil, nil
	}
	return h, nil
}

// Token is the access token to send, refreshed first if it expires
// within early. An expired one that cannot be refreshed is sent all the
// same: the server's 401 then says what to do.
func (h *Handler) Token() (*oauth2.Token, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.reloadLocked(); err != nil {
		return nil, err
	}
	if h.rec == nil {
		return nil, nil
	}
	tok := h.rec.Token
	// A short-lived token is refreshed a quarter of its life early.
	margin := min(early, tok.Expiry.Sub(h.rec.Obtained)/4)
	if tok.Expiry.IsZero() || h.now().Add(margin).Before(tok.Expiry) || tok.RefreshToken == "" || h.refused == tok.AccessToken {
		return tok, nil
	}
	if err := h.refreshLocked(tok.AccessToken); err != nil {
		var nl *NeedsLoginError
		if errors.As(err, &nl) {
			return tok, nil // the 401 will come, and Authorize say it
		}
		return nil, err
	}
	return h.rec.Token, nil
}

// Authorize is called by the transport for a 401 or 403. It gets the
// transport a token to retry with (nil error), or says that a sign-in is
// needed.
func (h *Handler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if resp.StatusCode == http.StatusForbidden {
		if bearerError(challenges) != "insufficient_scope" {
			// Not about the sign-in: the 403 reaches the caller as it
			// is, after one retry.
			return nil
		}
		h.mu.Lock()
		stamp := h.stamp
		h.mu.Unlock()
		return h.lost(&NeedsLoginError{Name: h.Name, Reason: "the server asks for more scopes than the sign-in has", Stamp: stamp})
	}
	sent := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
	h.mu.Lock()
	err := h.reloadLocked()
	if err == nil && h.rec == nil && !h.Explicit && resourceMetadata(challenges) == "" {
		h.mu.Unlock()
		return h.lost(ErrNotOAuth)
	}
	if err == nil {
		err = h.retryableLocked(sent)
	}
	var nl *NeedsLoginError
	if errors.As(err, &nl) {
		nl.Stamp = h.stamp
	}
	h.mu.Unlock()
	if err != nil {
		var nl *NeedsLoginError
		if errors.As(err, &nl) {
			return h.lost(err)
		}
		return err
	}
	return nil
}

// retryableLocked decides what a 401 to a request that carried sent
// leaves to try: nothing (NeedsLoginError), the newer token another
// process or a login stored, or a refresh.
func (h *Handler) retryableLocked(sent string) error {
	switch {
	case h.rec == nil:
		return &NeedsLoginError{Name: h.Name, Reason: "not signed in"}
	case h.rec.Token.AccessToken != sent:
		return nil // a newer token than the refused one
	case h.now().Sub(h.rec.Obtained) < freshFor:
		return &NeedsLoginError{Name: h.Name, Reason: "the server refused a token it just issued"}
	case h.rec.Token.RefreshToken == "":
		return &NeedsLoginError{Name: h.Name, Reason: "the server refused the token, and it came without a refresh token"}
	case h.refused == sent:
		return &NeedsLoginError{Name: h.Name, Reason: "the token expired and the authorization server refused to refresh it"}
	}
	return h.refreshLocked(sent)
}

// lost calls OnLost (once connected) with err, and returns it.
func (h *Handler) lost(err error) error {
	h.mu.Lock()
	f := h.onLost
	h.mu.Unlock()
	if f != nil {
		f(err)
	}
	return err
}

// refreshLocked refreshes the token that was had as current, under the
// lock every process shares: if another process refreshed it meanwhile,
// its token is taken instead (with rotating refresh tokens, refreshing
// again with the old refresh token would be refused, and could revoke the
// whole grant).
func (h *Handler) refreshLocked(current string) error {
	ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	defer cancel()
	unlock, err := h.Signins.Lock(ctx, h.ServerURL)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := h.Signins.Load(h.ServerURL)
	if err != nil {
		return err
	}
	h.rec, h.stamp, h.loaded = rec, h.Signins.Stamp(h.ServerURL), true
	h.publishLocked()
	if rec == nil {
		return &NeedsLoginError{Name: h.Name, Reason: "signed out"}
	}
	if rec.Token.AccessToken != current {
		return nil
	}
	if rec.Token.RefreshToken == "" {
		return &NeedsLoginError{Name: h.Name, Reason: "the token expired, and it came without a refresh token"}
	}
	tok, err := refresh(ctx, h.client(), rec)
	if err != nil {
		var nl *NeedsLoginError
		if errors.As(err, &nl) {
			nl.Name, h.refused = h.Name, current
		}
		return err
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = rec.Token.RefreshToken // not rotated: the old one stays good
	}
	next := *rec
	next.Token, next.Obtained = tok, h.now()
	if err := h.Signins.Save(&next); err != nil {
		return err
	}
	h.rec, h.stamp = &next, h.Signins.Stamp(h.ServerURL)
	h.publishLocked()
	return nil
}

func (h *Handler) client() *http.Client {
	if h.Client != nil {
		return h.Client
	}
	return http.DefaultClient
}

// refresh asks rec's token endpoint for a new token with its refresh
// token. It is written here rather than with oauth2.Config.TokenSource,
// which cannot send the resource parameter MCP requires in every token
// request (RFC 8707).
func refresh(ctx context.Context, c *http.Client, rec *Record) (*oauth2.Token, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rec.Token.RefreshToken}}
	if rec.Resource != "" {
		form.Set("resource", rec.Resource)
	}
	basic := rec.ClientSecret != "" && rec.AuthStyle != oauth2.AuthStyleInParams
	if !basic {
		form.Set("client_id", rec.ClientID)
		if rec.ClientSecret != "" {
			form.Set("client_secret", rec.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("refreshing the token: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		req.SetBasicAuth(url.QueryEscape(rec.ClientID), url.QueryEscape(rec.ClientSecret))
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("refreshing the token at %s: %w", shown(rec.TokenURL), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("refreshing the token at %s: %w", shown(rec.TokenURL), err)
	}
	var tr struct {
		AccessToken  string          `json:"access_token"`
		TokenType    string          `json:"token_type"`
		RefreshToken string          `json:"refresh_token"`
		ExpiresIn    json.Number     `json:"expires_in"`
		Error        string          `json:"error"`
		Scope        json.RawMessage `json:"scope"`
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	jsonErr := json.Unmarshal(body, &tr)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		code := tr.Error
		if jsonErr != nil || !validErrorCode(code) {
			code = ""
		}
		switch {
		case code == "invalid_grant" || code == "invalid_client" || code == "unauthorized_client":
			return nil, &NeedsLoginError{Reason: fmt.Sprintf("the authorization server refused the refresh (%s)", code)}
		case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnauthorized:
			return nil, &NeedsLoginError{Reason: fmt.Sprintf("the authorization server refused the refresh (%d %s)", resp.StatusCode, http.StatusText(resp.StatusCode))}
		}
		return nil, fmt.Errorf("refreshing the token at %s: %d %s", shown(rec.TokenURL), resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	if jsonErr != nil || (ct != "" && ct != "application/json") || tr.AccessToken == "" {
		return nil, fmt.Errorf("refreshing the token at %s: the answer is not a token response", shown(rec.TokenURL))
	}
	tok := &oauth2.Token{AccessToken: tr.AccessToken, TokenType: tr.TokenType, RefreshToken: tr.RefreshToken}
	if n, err := tr.ExpiresIn.Int64(); err == nil && n > 0 {
		tok.Expiry = time.Now().Add(time.Duration(n) * time.Second)
	}
	return tok, nil
}

// validErrorCode reports whether s can be shown: OAuth error codes are
// short ASCII words (RFC 6749 §5.2), and anything else could be an echo
// of what was sent.
func validErrorCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// resourceMetadata is the resource_metadata a challenge names (RFC 9728).
func resourceMetadata(cs []oauthex.Challenge) string {
	for _, c := range cs {
		if u := c.Params["resource_metadata"]; u != "" {
			return u
		}
	}
	return ""
}

// bearerError is the error a Bearer challenge names.
func bearerError(cs []oauthex.Challenge) string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["error"] != "" {
			return c.Params["error"]
		}
	}
	return ""
}

// shown is raw without user info, query or fragment, for messages.
func shown(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment = nil, "", "", ""
	return u.String()
}
