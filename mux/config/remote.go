package config

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/mcp-mux/mcp-mux/backends"
)

// Remote backends in the config: a [[backend]] with url instead of command
// (see backends/remote.go). Header values are secrets, as env values are:
// they are expanded the same way, and never shown.

// remoteOnlyKeys are the keys that mean something only with url.
var remoteOnlyKeys = []string{"headers", "transport", "auth", "oauth_client_id", "oauth_client_secret",
	"oauth_client_metadata_url", "oauth_scopes", "oauth_callback_port"}

// protocolHeaders are set by the transport on every request: a configured
// one would be ignored or break the session.
var protocolHeaders = map[string]bool{
	"Accept": true, "Connection": true, "Content-Length": true, "Content-Type": true, "Host": true,
	"Last-Event-Id": true, "Mcp-Protocol-Version": true, "Mcp-Session-Id": true, "Transfer-Encoding": true,
}

// validateRemote checks what is particular to a remote backend, or that a
// command's backend has none of it, and reports whether e is remote (has a
// url key). It expands the header values, and drops the keys a remote
// backend ignores.
func (p *parser) validateRemote(e backendEntry, s *Backend, warns *[]problem) bool {
	k := func(name string) keyPath { return append(keyPath{e.path[0]}, name) }
	_, hasURL := e.present["url"]
	if !hasURL {
		for _, key := range remoteOnlyKeys {
			if _, ok := e.present[key]; ok {
				p.add(k(key), "applies only to a remote backend (url); a backend that runs a command makes no HTTP requests")
			}
		}
		return false
	}
	if _, ok := e.present["command"]; ok {
		p.add(k("url"), "a backend has either a command or a url, not both (remove one)")
	}

	if e.present["url"] {
		u, err := url.Parse(s.URL)
		switch {
		case strings.Contains(s.URL, "${"):
			p.add(k("url"), `"${...}" is not expanded in url: put a token in headers, e.g. headers = { Authorization = "Bearer ${TOKEN}" }`)
		case err != nil:
			p.add(k("url"), "is not a valid URL (want e.g. \"https://example.com/mcp\")")
		case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			p.add(k("url"), "must be an http:// or https:// URL (got %q)", backends.ShownURL(s.URL))
		}
	}

	switch s.Transport {
	case "":
		s.Transport = backends.TransportAuto
	case backends.TransportAuto, backends.TransportStreamable, backends.TransportSSE:
	default:
		p.add(k("transport"), "must be %q, %q or %q (got %q)", backends.TransportAuto, backends.TransportStreamable, backends.TransportSSE, s.Transport)
	}

	if len(s.Headers) > 0 {
		headers := make(map[string]string, len(s.Headers))
		seen := map[string]string{}
		for name, val := range s.Headers {
			shown := HeaderNameShown(name)
			hk, line := k("headers").child(shown), p.lineOf(k("headers").child(name))
			canon := http.CanonicalHeaderKey(name)
			switch {
			case shown != name || name == "":
				p.addAt(hk, line, "invalid header name (letters, digits and !#$%%&'*+-.^_`|~ only)")
			case protocolHeaders[canon]:
				p.addAt(hk, line, "is set by the protocol (the transport sets it on every request): remove it")
			case seen[canon] != "":
				p.addAt(hk, line, "header %s is given twice (as %q and %q: names are case-insensitive)", canon, seen[canon], name)
			}
			seen[canon] = name
			exp, issues := p.expandSecrets(val)
			for _, is := range issues {
				if (is.unset != "" || is.secret != "") && s.Disabled {
					continue
				}
				p.addAt(hk, line, "%s", is.message())
			}
			if strings.ContainsAny(exp, "\r\n\x00") {
				p.addAt(hk, line, "value contains a line break or NUL character")
			}
			p.warnBareEnvVar(hk, line, val, warns)
			headers[name] = exp
		}
		s.Headers = headers
	}

	p.validateOAuth(e, s)

	// A command's keys: env most likely holds a token meant for the
	// server, which would silently not be sent; args likewise say the
	// entry was meant to run something. cwd and inherit_env lose nothing.
	if _, ok := e.present["env"]; ok {
		p.add(k("env"), `a remote backend has no process to give an environment: to send a token, use headers, e.g. headers = { Authorization = "Bearer ${TOKEN}" }`)
	}
	if _, ok := e.present["args"]; ok {
		p.add(k("args"), "applies only to a command; a remote backend (url) runs nothing")
	}
	for _, key := range []string{"cwd", "inherit_env"} {
		if _, ok := e.present[key]; ok {
			*warns = append(*warns, problem{path: k(key), line: p.lineOf(k(key)),
				message: "ignored: a remote backend (url) has no process"})
		}
	}
	s.Cwd, s.InheritEnv, s.Env, s.Args = "", nil, nil, nil
	return true
}

// HeaderNameShown is name if it is a valid header name, else its valid
// start and "...": a name that is not one may be a pasted
// "Authorization: Bearer <token>".
func HeaderNameShown(name string) string {
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return name[:i] + "..."
		}
	}
	return name
}

// isTokenChar reports whether c may be in an HTTP header name (RFC 9110's
// tchar).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// IsProtocolHeader reports whether the transport sets the header (by its
// canonical name) on every request, so that a configured one would be
// ignored or break the session.
func IsProtocolHeader(canonical string) bool { return protocolHeaders[canonical] }

// validateOAuth checks a remote backend's sign-in keys, and expands the
// client's ID and secret (the secret as a header value: never shown).
func (p *parser) validateOAuth(e backendEntry, s *Backend) {
	k := func(name string) keyPath { return append(keyPath{e.path[0]}, name) }
	switch s.Auth {
	case "", backends.AuthOAuth:
	default:
		p.add(k("auth"), "must be %q (the server signs in with OAuth: mcp-mux login) or absent (got %q)", backends.AuthOAuth, s.Auth)
	}
	oauthKeys := false
	for _, key := range remoteOnlyKeys {
		if _, ok := e.present[key]; ok && strings.HasPrefix(key, "oauth_") {
			oauthKeys = true
		}
	}
	if s.Auth == backends.AuthOAuth || oauthKeys {
		for name := range s.Headers {
			if http.CanonicalHeaderKey(name) == "Authorization" {
				p.add(k("headers").child(name), "an Authorization header and an OAuth sign-in are two tokens for one server: keep one (remove the header, or auth and the oauth_* keys)")
			}
		}
		if s.Transport == backends.TransportSSE {
			p.add(k("transport"), "an OAuth sign-in needs the Streamable HTTP transport: remove transport, or set it to %q", backends.TransportStreamable)
		}
	}
	expand := func(key string, v *string, secretsToo bool) {
		if *v == "" {
			return
		}
		var exp string
		var issues []envIssue
		if secretsToo {
			exp, issues = p.expandSecrets(*v)
		} else {
			exp, issues = expandEnv(*v, p.lookupEnv)
		}
		for _, is := range issues {
			if (is.unset != "" || is.secret != "") && s.Disabled {
				continue
			}
			p.add(k(key), "%s", is.message())
		}
		if strings.ContainsAny(exp, "\r\n\x00") {
			p.add(k(key), "value contains a line break or NUL character")
		}
		*v = exp
	}
	expand("oauth_client_id", &s.OAuthClientID, false)
	expand("oauth_client_secret", &s.OAuthClientSecret, true)
	if _, ok := e.present["oauth_client_secret"]; ok && s.OAuthClientID == "" {
		p.add(k("oauth_client_secret"), "a client secret without oauth_client_id: give the client's ID too")
	}
	if raw := s.OAuthClientMetadataURL; raw != "" {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			p.add(k("oauth_client_metadata_url"), "must be an https:// URL with a path, where the client ID metadata document is served (got %q)", backends.ShownURL(raw))
		}
	}
	for i, scope := range s.OAuthScopes {
		if scope == "" || strings.ContainsFunc(scope, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r > '~' }) {
			p.add(k("oauth_scopes").index(i), "invalid scope %q: a scope is printable ASCII without spaces, quotes or backslashes", scope)
		}
	}
	if s.OAuthCallbackPort < 0 || s.OAuthCallbackPort > 65535 {
		p.add(k("oauth_callback_port"), "must be a port, 1 to 65535 (or 0: one the OS picks) (got %d)", s.OAuthCallbackPort)
	}
}
