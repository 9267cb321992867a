package testkit

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// OAuthServer is an MCP server that requires an OAuth sign-in, with its
// authorization server on another origin, both in the test process over
// real HTTP: protected resource metadata, authorization server metadata
// (RFC 9207 iss advertised), dynamic client registration, an authorize
// endpoint that approves at once and redirects, PKCE (S256) and the
// resource parameter checked, access tokens that live TokenTTL, and
// rotating refresh tokens (each works once; a reused one is refused and
// revokes its grant, as OAuth 2.1 advises).
type OAuthServer struct {
	MCP *httptest.Server // the resource: /mcp
	AS  *httptest.Server // the authorization server
	// TokenEndpoint, if set before a sign-in, is the token endpoint the
	// metadata names instead of the server's own.
	TokenEndpoint string
	name          string

	mu       sync.Mutex
	ttl      time.Duration
	clients  map[string][]string      // client_id → redirect URIs
	codes    map[string]oauthCode     // code → what it was issued for
	access   map[string]time.Time     // access token → expiry
	refresh  map[string]*oauthGrant   // refresh token → its grant (nil: used)
	used     map[string]bool          // refresh tokens already used
	grants   map[*oauthGrant]struct{} // live grants
	tokenReq map[string]int           // grant_type → requests
	issued   []string                 // every access and refresh token issued
	denied   int                      // 401s the resource sent
	resource map[string]string        // access token → resource it was issued for
}

type oauthCode struct {
	client, redirect, challenge, resource string
}

type oauthGrant struct {
	client, resource string
	revoked          bool
}

// StartOAuthServer starts both servers; name is the MCP server's (its
// tools: echo). They are closed when the test ends.
func StartOAuthServer(t testing.TB, name string, tokenTTL time.Duration) *OAuthServer {
	s := &OAuthServer{
		name: name, ttl: tokenTTL,
		clients: map[string][]string{}, codes: map[string]oauthCode{}, access: map[string]time.Time{},
		refresh: map[string]*oauthGrant{}, used: map[string]bool{}, grants: map[*oauthGrant]struct{}{},
		tokenReq: map[string]int{}, resource: map[string]string{},
	}
	s.AS = httptest.NewServer(http.HandlerFunc(s.serveAS))
	t.Cleanup(s.AS.Close)

	srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echoes text"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ": " + in.Text}}}, nil, nil
	})
	mux := http.NewServeMux()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mux.Handle("/mcp", s.counting(auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{})(h)))
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": s.URL(), "authorization_servers": []string{s.AS.URL}, "scopes_supported": []string{"mcp"}})
	})
	s.MCP = httptest.NewServer(mux)
	t.Cleanup(s.MCP.Close)
	return s
}

// counting adds the resource metadata to a 401 (RequireBearerToken's
// options are fixed before the URL is known) and counts 401s.
func (s *OAuthServer) counting(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&challengeWriter{ResponseWriter: w, s: s}, r)
	})
}

type challengeWriter struct {
	http.ResponseWriter
	s *OAuthServer
}

func (c *challengeWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		c.s.mu.Lock()
		c.s.denied++
		c.s.mu.Unlock()
		c.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+c.s.MCP.URL+`/.well-known/oauth-protected-resource/mcp", scope="mcp"`)
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *challengeWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// URL is the MCP endpoint.
func (s *OAuthServer) URL() string { return s.MCP.URL + "/mcp" }

func (s *OAuthServer) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.access[token]
	if !ok || time.Now().After(exp) || s.resource[token] != s.URL() {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{Expiration: exp, Scopes: []string{"mcp"}}, nil
}

// Forget drops every client, code and token, as a server that restarted
// without keeping them.
func (s *OAuthServer) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients, s.codes, s.access = map[string][]string{}, map[string]oauthCode{}, map[string]time.Time{}
	s.refresh, s.grants = map[string]*oauthGrant{}, map[*oauthGrant]struct{}{}
}

// TokenRequests is how many token requests of grant_type were answered.
func (s *OAuthServer) TokenRequests(grantType string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenReq[grantType]
}

// Issued is every access and refresh token issued so far: what no output
// may show.
func (s *OAuthServer) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// Revoked reports whether a grant was revoked for a reused refresh token.
func (s *OAuthServer) Revoked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for g := range s.grants {
		if g.revoked {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, code int, e string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": e})
}

func (s *OAuthServer) serveAS(w http.ResponseWriter, r *http.Request) {
	iss := s.AS.URL
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		writeJSON(w, map[string]any{
			"issuer": iss, "authorization_endpoint": iss + "/authorize", "token_endpoint": cmp.Or(s.TokenEndpoint, iss+"/token"),
			"registration_endpoint": iss + "/register", "response_types_supported": []string{"code"},
			"grant_types_supported": []string{"authorization_code", "refresh_token"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none"}, "scopes_supported": []string{"mcp", "offline_access"},
			"authorization_response_iss_parameter_supported": true,
		})
	case "/register":
		var meta struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		if json.NewDecoder(r.Body).Decode(&meta) != nil || len(meta.RedirectURIs) == 0 {
			oauthError(w, 400, "invalid_client_metadata")
			return
		}
		id := rand.Text()
		s.mu.Lock()
		s.clients[id] = meta.RedirectURIs
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"client_id": id, "redirect_uris": meta.RedirectURIs, "token_endpoint_auth_method": "none"})
	case "/authorize":
		q := r.URL.Query()
		s.mu.Lock()
		redirects, ok := s.clients[q.Get("client_id")]
		s.mu.Unlock()
		if !ok || !slices.Contains(redirects, q.Get("redirect_uri")) || q.Get("code_challenge_method") != "S256" ||
			q.Get("code_challenge") == "" || q.Get("resource") != s.URL() || q.Get("response_type") != "code" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		code := rand.Text()
		s.mu.Lock()
		s.codes[code] = oauthCode{client: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), resource: q.Get("resource")}
		s.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		v := url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {iss}}
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	case "/token":
		s.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *OAuthServer) token(w http.ResponseWriter, r *http.Request) {
	if r.ParseForm() != nil {
		oauthError(w, 400, "invalid_request")
		return
	}
	f := r.PostForm
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenReq[f.Get("grant_type")]++
	var g *oauthGrant
	switch f.Get("grant_type") {
	case "authorization_code":
		c, ok := s.codes[f.Get("code")]
		delete(s.codes, f.Get("code"))
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || c.client != f.Get("client_id") || c.redirect != f.Get("redirect_uri") ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || f.Get("resource") != c.resource {
			oauthError(w, 400, "invalid_grant")
			return
		}
		g = &oauthGrant{client: c.client, resource: c.resource}
		s.grants[g] = struct{}{}
	case "refresh_token":
		rt := f.Get("refresh_token")
		if s.used[rt] {
			// A rotated refresh token used again: the grant may be
			// stolen, and ends.
			if old := s.refresh[rt]; old != nil {
				old.revoked = true
			}
			oauthError(w, 400, "invalid_grant")
			return
		}
		g = s.refresh[rt]
		if g == nil || g.revoked || g.client != f.Get("client_id") || (f.Get("resource") != "" && f.Get("resource") != g.resource) {
			oauthError(w, 400, "invalid_grant")
			return
		}
		s.used[rt] = true
	default:
		oauthError(w, 400, "unsupported_grant_type")
		return
	}
	at, rt := "at-"+rand.Text(), "rt-"+rand.Text()
	s.access[at] = time.Now().Add(s.ttl)
	s.resource[at] = g.resource
	s.refresh[rt] = g
	s.issued = append(s.issued, at, rt)
	writeJSON(w, map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(s.ttl.Seconds()), "refresh_token": rt, "scope": strings.Join([]string{"mcp"}, " ")})
}
