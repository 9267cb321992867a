package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// LoginOptions is what `mcp-mux login NAME` knows of the backend, and
// how it reaches the user.
type LoginOptions struct {
	Name      string // the backend's
	ServerURL string
	// Headers are the backend's configured headers (not Authorization),
	// sent to its server as serving does.
	Headers map[string]string
	// ClientID and ClientSecret are a pre-registered client; without
	// them the server's authorization server registers one (a client ID
	// metadata document at ClientMetadataURL where it supports those,
	// else dynamic registration).
	ClientID, ClientSecret string
	ClientMetadataURL      string
	// Scopes, if set, are asked for instead of those the server names.
	Scopes []string
	// CallbackPort is the redirect listener's port on 127.0.0.1 (0: one
	// the OS picks).
	CallbackPort int
	// Timeout bounds the whole sign-in (the user in the browser included).
	Timeout time.Duration
	// Say tells the user how the sign-in goes: the URL to open, then
	// progress. Where that goes is the caller's (mcp-mux login: stderr);
	// this package writes to no stream, so never to stdout, the protocol
	// stream when mcp-mux serves. Nil says nothing.
	Say func(msg string)
	// Open opens the authorization URL for the user (OpenBrowser).
	Open func(url string) error
	// Version is mcp-mux's, for the client's name in initialize.
	Version string
}

// CallbackPath is the redirect URI's path on the loopback listener.
const CallbackPath = "/callback"

// Login signs mcp-mux in to o.ServerURL: it connects, and the server's 401
// starts the go-sdk's authorization code flow (discovery, registration,
// PKCE, the resource parameter, state and issuer checks), for which the
// user's browser is sent to the authorization URL and comes back to a
// listener on 127.0.0.1. The tokens and the registration they belong to
// are stored in s, replacing an earlier sign-in.
func Login(ctx context.Context, s *Signins, o LoginOptions) (*Record, error) {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Open == nil {
		o.Open = OpenBrowser
	}
	if o.Say == nil {
		o.Say = func(string) {}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.CallbackPort)))
	if err != nil {
		return nil, fmt.Errorf("cannot listen for the browser's return on 127.0.0.1:%d: %w", o.CallbackPort, err)
	}
	cb := newCallback(ln, o.Name)
	defer cb.close()

	seen := &observer{}
	// Discovery, registration and the token requests go where the
	// server's metadata points; the servers are the user's own choice,
	// so loopback and LAN ones are allowed (the go-sdk's default client
	// refuses those).
	metaClient := &http.Client{Transport: seen, Timeout: time.Minute}
	var captured struct {
		sync.Mutex
		cfg *oauth2.Config
		tok *oauth2.Token
	}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL: cb.redirectURL(),
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			return cb.fetch(ctx, args.URL, o)
		},
		RequestRefreshToken:   true,
		AcceptUnadvertisedIss: true, // an iss that is sent is checked all the same
		Client:                metaClient,
		NewTokenSource: func(ctx context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			captured.Lock()
			captured.cfg, captured.tok = c, t
			captured.Unlock()
			return oauth2.StaticTokenSource(t), nil
		},
	}
	if len(o.Scopes) > 0 {
		cfg.ScopeFilter = func([]string) []string { return o.Scopes }
	}
	// The spec's order: a pre-registered client if there is one, else a
	// client ID metadata document where the server takes those, else
	// dynamic registration. (The go-sdk tries a metadata document first,
	// so it is not offered next to a pre-registered client.)
	switch {
	case o.ClientID != "":
		pre := &oauthex.ClientCredentials{ClientID: o.ClientID}
		if o.ClientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: o.ClientSecret}
		}
		cfg.PreregisteredClient = pre
	default:
		if o.ClientMetadataURL != "" {
			cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: o.ClientMetadataURL}
		}
		cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName:              "mcp-mux",
			RedirectURIs:            []string{cb.redirectURL()},
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			TokenEndpointAuthMethod: "none",
		}}
	}
	inner, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return nil, fmt.Errorf("setting up the sign-in: %w", err)
	}
	handler := &onceHandler{AuthorizationCodeHandler: inner}

	origin := originOf(o.ServerURL)
	mcpClient := &http.Client{
		Transport: &headerTransport{origin: origin, headers: o.Headers},
		// The token goes to the server it was issued for only.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if originOf(req.URL.String()) != origin {
				return fmt.Errorf("the server redirected to another origin (%s): a token is not sent there", originOf(req.URL.String()))
			}
			if len(via) >= 10 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-mux", Version: o.Version}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: o.ServerURL, HTTPClient: mcpClient, OAuthHandler: handler, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("no sign-in within %s: the browser did not come back to %s (run %q again)", o.Timeout, cb.redirectURL(), Command(o.Name))
		}
		if first := handler.firstErr(); first != nil {
			err = first
		}
		return nil, fmt.Errorf("signing in to %s: %w", shown(o.ServerURL), loginError(err))
	}
	cs.Close()
	captured.Lock()
	c, tok := captured.cfg, captured.tok
	captured.Unlock()
	if c == nil || tok == nil {
		return nil, fmt.Errorf("%s answered without asking for a sign-in: there is nothing to sign in to", shown(o.ServerURL))
	}
	rec := &Record{
		ServerURL:    o.ServerURL,
		Issuer:       seen.issuer(),
		Resource:     seen.resource(o.ServerURL),
		ClientID:     c.ClientID,
		ClientSecret: c.ClientSecret,
		TokenURL:     c.Endpoint.TokenURL,
		AuthStyle:    c.Endpoint.AuthStyle,
		Scopes:       c.Scopes,
		Token:        tok,
		Obtained:     time.Now(),
	}
	switch {
	case o.ClientID != "":
		rec.Registration = "pre-registered"
	case o.ClientMetadataURL != "" && c.ClientID == o.ClientMetadataURL:
		rec.Registration = "metadata document"
	default:
		rec.Registration = "dynamic"
	}
	if err := s.Save(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// loginError is the go-sdk's error without its chain of "sending
// initialize: rejected by transport: ...".
func loginError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		// Its message quotes the token endpoint's whole answer, which
		// may echo what was sent (the code, the verifier): only the
		// OAuth error code and the status are told.
		code := re.ErrorCode
		if !validErrorCode(code) {
			code = "an error"
		}
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return &wrapped{msg: fmt.Sprintf("the token endpoint refused the authorization code with %s (HTTP %d)", code, status), err: err}
	}
	msg := err.Error()
	for _, wrapper := range []string{`calling "initialize": `, `sending "initialize": `, "rejected by transport: "} {
		msg = strings.Replace(msg, wrapper, "", 1)
	}
	return &wrapped{msg: msg, err: err}
}

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// headerTransport adds a backend's configured headers to the requests to
// its server's origin, as serving does.
type headerTransport struct {
	origin  string
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 && originOf(req.URL.String()) == t.origin {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			if req.Header.Get(k) == "" {
				req.Header.Set(k, v)
			}
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// observer is the sign-in's metadata client's transport: it notes the
// issuer the authorization server's metadata names and the resource of
// the protected resource metadata, which the go-sdk's handler checks and
// uses but does not tell (the record names them).
type observer struct {
	mu  sync.Mutex
	iss string
	res string
}

func (o *observer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || req.Method != http.MethodGet {
		return resp, err
	}
	path := req.URL.Path
	isAS := strings.Contains(path, "/.well-known/oauth-authorization-server") || strings.Contains(path, "/.well-known/openid-configuration")
	isPR := strings.Contains(path, "/.well-known/oauth-protected-resource")
	if !isAS && !isPR {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var meta struct {
		Issuer   string `json:"issuer"`
		Resource string `json:"resource"`
	}
	if json.Unmarshal(body, &meta) == nil {
		o.mu.Lock()
		if isAS && meta.Issuer != "" {
			o.iss = meta.Issuer
		}
		if isPR && meta.Resource != "" {
			o.res = meta.Resource
		}
		o.mu.Unlock()
	}
	return resp, nil
}

func (o *observer) issuer() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.iss
}

// resource is the resource the tokens were asked for: the metadata's, or
// the server URL (what the go-sdk asks for without metadata).
func (o *observer) resource(serverURL string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.res != "" {
		return o.res
	}
	return serverURL
}

// callback is the loopback redirect listener: it takes the one request
// whose state is the sign-in's, shows the user a page saying how it went,
// and closes.
type callback struct {
	ln     net.Listener
	srv    *http.Server
	name   string
	mu     sync.Mutex
	state  string // the authorization request's; set by fetch
	result chan callbackResult
	once   sync.Once
}

type callbackResult struct {
	res *auth.AuthorizationResult
	err error
}

func newCallback(ln net.Listener, name string) *callback {
	cb := &callback{ln: ln, name: name, result: make(chan callbackResult, 1)}
	cb.srv = &http.Server{Handler: cb, ReadHeaderTimeout: 10 * time.Second}
	go cb.srv.Serve(ln)
	return cb
}

func (cb *callback) redirectURL() string {
	return "http://" + cb.ln.Addr().String() + CallbackPath
}

func (cb *callback) close() {
	cb.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		cb.srv.Shutdown(ctx)
	})
}

// ServeHTTP answers the browser. Only CallbackPath with the sign-in's
// state counts; anything else gets an error page and changes nothing
// (another tab, a stale link, a page that guessed the port).
func (cb *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer") // the URL carries the code
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	cb.mu.Lock()
	state := cb.state
	cb.mu.Unlock()
	q := r.URL.Query()
	if r.URL.Path != CallbackPath || r.Method != http.MethodGet || state == "" || q.Get("state") != state {
		w.WriteHeader(http.StatusBadRequest)
		page(w, "Not the sign-in mcp-mux is waiting for", "This link is not the one of the sign-in that mcp-mux started. Run mcp-mux login "+cb.name+" again if you need to.")
		return
	}
	var res callbackResult
	if e := q.Get("error"); e != "" {
		code := e
		if !validErrorCode(code) {
			code = "an error"
		}
		res.err = fmt.Errorf("the authorization server answered %s instead of signing you in", code)
		if d := q.Get("error_description"); d != "" && len(d) < 300 {
			res.err = fmt.Errorf("the authorization server answered %s instead of signing you in: %s", code, d)
		}
		w.WriteHeader(http.StatusOK)
		page(w, "Sign-in failed", "The sign-in to "+cb.name+" did not succeed ("+code+"). See the terminal, then close this tab.")
	} else if code := q.Get("code"); code == "" {
		res.err = errors.New("the browser came back without an authorization code")
		w.WriteHeader(http.StatusBadRequest)
		page(w, "Sign-in failed", "The authorization server sent no code. See the terminal, then close this tab.")
	} else {
		res.res = &auth.AuthorizationResult{Code: code, State: q.Get("state"), Iss: q.Get("iss")}
		page(w, "Signed in", "Signed in to "+cb.name+". You can close this tab.")
	}
	select {
	case cb.result <- res:
		// One request is taken: the listener goes once it is answered.
		go cb.close()
	default:
	}
}

func page(w io.Writer, title, text string) {
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>mcp-mux: %s</title><body style=\"font-family:sans-serif;margin:3em\"><h1>%s</h1><p>%s</p>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
}

// fetch is the go-sdk's AuthorizationCodeFetcher: it shows the user the
// authorization URL (always said, for a user without a browser here),
// opens it, and waits for the browser to come back.
func (cb *callback) fetch(ctx context.Context, authURL string, o LoginOptions) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, fmt.Errorf("the authorization URL does not parse: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("the authorization URL is not an http(s) URL (%s)", u.Scheme)
	}
	state := u.Query().Get("state")
	cb.mu.Lock()
	cb.state = state
	cb.mu.Unlock()
	o.Say(fmt.Sprintf("To sign in to %s, open this URL in a browser (on this machine: the sign-in comes back to %s):\n\n  %s\n\n", o.Name, cb.redirectURL(), authURL))
	if err := o.Open(authURL); err != nil {
		o.Say(fmt.Sprintf("Could not open a browser (%v): open the URL above yourself.\n", err))
	} else {
		o.Say("Opened a browser; waiting for the sign-in to finish there...\n")
	}
	select {
	case r := <-cb.result:
		return r.res, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// onceHandler runs the sign-in once per login: after a failed exchange
// the go-sdk's client sends again (and would start a second flow in the
// browser, whose listener is gone); after a success, a token the server
// refuses at once is not signed in again.
type onceHandler struct {
	*auth.AuthorizationCodeHandler
	mu   sync.Mutex
	done bool
	err  error
}

func (h *onceHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		resp.Body.Close()
		if h.err != nil {
			return h.err
		}
		return fmt.Errorf("the server refused the token it just issued (%s)", resp.Status)
	}
	h.done = true
	h.err = h.AuthorizationCodeHandler.Authorize(ctx, req, resp)
	return h.err
}

func (h *onceHandler) firstErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}
