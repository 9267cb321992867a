package backends

import "sort"

// Spec is what to run as one backend: a command (a child process) or a URL
// (a remote MCP endpoint). The config package loads and validates it; this
// package runs it. How mux exposes the backend is none of its business.
type Spec struct {
	// Name identifies the backend in logs and errors.
	Name string
	// Command is executed directly (never through a shell) with Args.
	Command string
	Args    []string
	// URL, instead of Command, makes this a remote backend: an MCP endpoint
	// over HTTP (see remote.go). A backend has exactly one of the two.
	URL string
	// Headers are added to every request to URL's origin. Values hold
	// tokens: never log them.
	Headers map[string]string
	// Transport is how URL is spoken to: TransportAuto ("" means the
	// same), TransportStreamable or TransportSSE.
	Transport string
	// Auth is "" (OAuth when the server asks for it) or AuthOAuth.
	Auth string
	// OAuth is how a remote backend signs in (mcp-mux login), when its
	// server asks for OAuth.
	OAuth OAuthSpec
	// Env is added to the backend's environment, values expanded. Never
	// log them.
	Env map[string]string
	// InheritEnv names variables of mux's own environment the backend gets
	// besides a minimal default set (PATH, HOME, ...); "*" passes all.
	InheritEnv []string
	// Cwd is the working directory of the child; empty means mux's own.
	Cwd string
	// Environ is the environment the child's is made of (ChildEnv), and
	// whose PATH a bare Command is looked up on; nil means mux's own. A
	// shared mcp-mux sets it to the environment of the session it serves.
	Environ []string
	// Protocol is "" (the handshake era, pinned) or ProtocolAuto (probe,
	// and speak the current era if the server answers).
	Protocol string
}

// AuthOAuth is Spec.Auth for a server that signs in with OAuth.
const AuthOAuth = "oauth"

// OAuthSpec is the sign-in settings of a remote backend (see
// mux/config's oauth_* keys).
type OAuthSpec struct {
	ClientID, ClientSecret string // never log ClientSecret
	ClientMetadataURL      string
	Scopes                 []string
	CallbackPort           int
}

// EnvKeys lists the names (never the values) of the configured env entries,
// for logs.
func (s *Spec) EnvKeys() []string {
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
