package config

import (
	"fmt"
	"time"

	"github.com/mcp-mux/mcp-mux/backends"
)

// Backend is one [[backend]] entry of the config file: what to run
// (Spec, the part the backends package reads) and how mcp-mux exposes it
// (prefix, filters, polling, restarts, timeouts), which only mux reads.
type Backend struct {
	// Name identifies the backend in logs, errors and cursors; unique, [A-Za-z0-9_-]+.
	Name string `toml:"name"`
	// Command is executed directly (never through a shell) with Args.
	Command string   `toml:"command"`
	Args    []string `toml:"args"`
	// URL, instead of Command, makes this a remote backend: an MCP endpoint
	// over HTTP. A backend has exactly one of the two.
	URL string `toml:"url"`
	// Headers are added to every request to URL's origin. Values are
	// expanded when the file is loaded, as Env's are: they hold tokens.
	// Never log them.
	Headers map[string]string `toml:"headers"`
	// Transport is how URL is spoken to: backends.TransportAuto ("" means
	// the same), TransportStreamable or TransportSSE.
	Transport string `toml:"transport"`
	// Auth is "" (the server asks for an OAuth sign-in, if it wants one,
	// with a 401 that points to its resource metadata) or
	// backends.AuthOAuth (it signs in with OAuth: `mcp-mux login NAME`).
	Auth string `toml:"auth"`
	// OAuthClientID and OAuthClientSecret are a client registered with
	// the server's authorization server beforehand; without them one is
	// registered at sign-in. The secret is expanded as header values
	// are, and never logged.
	OAuthClientID     string `toml:"oauth_client_id"`
	OAuthClientSecret string `toml:"oauth_client_secret"`
	// OAuthClientMetadataURL is an https URL serving a client ID
	// metadata document for mcp-mux, used where the authorization
	// server supports those.
	OAuthClientMetadataURL string `toml:"oauth_client_metadata_url"`
	// OAuthScopes are asked for instead of the scopes the server names.
	OAuthScopes []string `toml:"oauth_scopes"`
	// OAuthCallbackPort is the port of the sign-in's redirect listener
	// on 127.0.0.1 (0: one the OS picks); for a server that accepts only
	// a registered redirect URI.
	OAuthCallbackPort int `toml:"oauth_callback_port"`
	// Env is added to the backend's environment. Values are expanded
	// (${VAR}, ${VAR:-default}) when the file is loaded. Never log them.
	Env map[string]string `toml:"env"`
	// InheritEnv names variables of mux's own environment the backend gets
	// besides a minimal default set (PATH, HOME, ...); "*" passes all of
	// mux's environment. In TOML: inherit_env = true (meaning ["*"]) or a
	// list of names.
	InheritEnv []string `toml:"inherit_env"`
	// Cwd is the working directory of the child; empty means mux's own.
	Cwd string `toml:"cwd"`
	// Protocol is "" (the default: the handshake era, pinned, since real
	// stdio servers exit or hang on the current era's server/discover
	// probe) or "auto" (probe, and speak the current era if it answers).
	Protocol string `toml:"protocol"`

	// Prefix is put before tool and prompt names (with the mux's separator).
	// nil means "use Name"; a pointer to "" exposes names unprefixed.
	Prefix *string `toml:"prefix"`
	// Tools, when not nil, exposes only the backend's tools whose own
	// names (before the prefix) match one of these path.Match globs;
	// ExcludeTools then hides the ones matching any of its globs. A tool
	// filtered out is neither listed nor callable. Prompts and
	// ExcludePrompts do the same for prompts. The mux applies them when it
	// merges the catalogs, so a reload changes them without a restart.
	Tools          []string `toml:"tools"`
	ExcludeTools   []string `toml:"exclude_tools"`
	Prompts        []string `toml:"prompts"`
	ExcludePrompts []string `toml:"exclude_prompts"`
	Disabled       bool     `toml:"disabled"`
	// Overrides ([[backend.override]]) change how the agent sees some of
	// its tools: name, title, description, annotations (override.go). The
	// filters and pin see the tools' own names, not the overridden ones.
	// Like the filters, they apply when the catalogs are merged.
	Overrides []ToolOverride `toml:"override"`
	// OverrideLines is the line of each of Overrides in the file (0 if
	// unknown), for what check --connect says of one. Not a key: a
	// reload that only moves an entry changes nothing.
	OverrideLines []int `toml:"-"`
	// FilterLines is the line of each pattern of tools, exclude_tools,
	// prompts, exclude_prompts and pin, by key, for what check says of
	// one that matches nothing (PatternAt). Not a key, as OverrideLines.
	FilterLines map[string][]int `toml:"-"`
	// Pin: its tools whose own names match one of these globs are always
	// in an agent's tool list, whatever tool_list is (and are not repeated
	// in search results).
	Pin []string `toml:"pin"`
	// PollInterval, when non-zero, makes the mux read each local-only
	// subscribed resource of this backend on this interval.
	PollInterval Duration `toml:"poll_interval"`
	// Restart is RestartOnFailure (the default) or RestartNever.
	Restart string `toml:"restart"`
	// RequestTimeout overrides [mux] request_timeout for this backend.
	RequestTimeout Duration `toml:"request_timeout"`
	// Start overrides [mux] start for this backend.
	Start string `toml:"start"`
	// IdleStop overrides [mux] idle_stop for this backend (0: [mux]'s).
	IdleStop Duration `toml:"idle_stop"`
	// Share is whether sessions of the shared mcp-mux share one instance
	// of it: ShareAuto (the default), ShareAlways or ShareNever.
	Share string `toml:"share"`

	// Broken, set by LoadForServing, is why the entry cannot run (its
	// mistakes, as FILE:LINE: key: message, one per line): mux shows it
	// failed with this reason, and serves the others.
	Broken string `toml:"-"`
	// Renamed, set with Broken when the entry's own name cannot name it
	// (an earlier backend's, or not a valid name) and Name is "backend
	// #N" instead, is what the entry calls itself, for messages:
	// `"memory", a duplicate name`, `"my notes", an invalid name`, `no name`.
	Renamed string `toml:"-"`
	// MissingSecrets, set by LoadForServing, are the NAMEs of the
	// ${secret:NAME} its values use that are not stored, sorted: each is
	// among the reasons in Broken, and storing one (mcp-mux secret set)
	// is worth reading the file again.
	MissingSecrets []string `toml:"-"`
}

// Label is how a message names b: `backend "memory"`, or, for an entry
// named by its place, `backend #2 ("memory", a duplicate name)`.
func (b *Backend) Label() string {
	if b.Renamed != "" {
		return b.Name + " (" + b.Renamed + ")"
	}
	return fmt.Sprintf("backend %q", b.Name)
}

// Spec is what the backends package needs to run b.
func (b *Backend) Spec() backends.Spec {
	return backends.Spec{
		Name:      b.Name,
		Command:   b.Command,
		Args:      b.Args,
		URL:       b.URL,
		Headers:   b.Headers,
		Transport: b.Transport,
		Auth:      b.Auth,
		OAuth: backends.OAuthSpec{
			ClientID:          b.OAuthClientID,
			ClientSecret:      b.OAuthClientSecret,
			ClientMetadataURL: b.OAuthClientMetadataURL,
			Scopes:            b.OAuthScopes,
			CallbackPort:      b.OAuthCallbackPort,
		},
		Env:        b.Env,
		InheritEnv: b.InheritEnv,
		Cwd:        b.Cwd,
		Protocol:   b.Protocol,
	}
}

// SpecIn is Spec for a session launched with environ in cwd (see
// mux.WithEnviron): the child's environment is made of environ, and it runs
// in cwd unless b has a cwd of its own, as it would run where mcp-mux was
// started. A nil environ and "" are mcp-mux's own.
func (b *Backend) SpecIn(environ []string, cwd string) backends.Spec {
	s := b.Spec()
	s.Environ = environ
	if s.Cwd == "" {
		s.Cwd = cwd
	}
	return s
}

// StartPolicy is when b starts: its own start, else mux's, else StartAuto.
func (b Backend) StartPolicy(mux *Settings) string {
	switch {
	case b.Start != "":
		return b.Start
	case mux != nil && mux.Start != "":
		return mux.Start
	}
	return StartAuto
}

// IdleAfter is how long b may be idle before it is stopped (0: never).
func (b Backend) IdleAfter(mux *Settings) time.Duration {
	if b.IdleStop.Duration > 0 || mux == nil {
		return b.IdleStop.Duration
	}
	return mux.IdleStop.Duration
}

// EffectivePrefix returns the prefix tools and prompts of this backend get.
func (b *Backend) EffectivePrefix() string {
	if b.Prefix == nil {
		return b.Name
	}
	return *b.Prefix
}

// Filter is one of a backend's name filters as the file writes it.
type Filter struct {
	Key      string // the config key: tools, exclude_tools, prompts, exclude_prompts
	Kind     string // what it filters: tool or prompt
	Patterns []string
}

// Filters are b's filter lists with their config keys, in the order the
// file documents them.
func (b *Backend) Filters() []Filter {
	return []Filter{
		{"tools", "tool", b.Tools},
		{"exclude_tools", "tool", b.ExcludeTools},
		{"prompts", "prompt", b.Prompts},
		{"exclude_prompts", "prompt", b.ExcludePrompts},
		{"pin", "tool", b.Pin},
	}
}

// Duration is a time.Duration written in config files as "30s", "1m30s".
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler for the toml decoder.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"30s\", \"2m\")", string(b))
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", string(b))
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }
