package main

import (
	"slices"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/rendezvous"
)

// backendIdentity is what a backend of a session depends on: two
// sessions in one project whose backends all have the same identity share
// a Mux (and across Muxes, backends.Pool shares each backend that runs
// alike: backends.Identity). It is
// what the backend would get, not what the session has: the resolved
// command, args, working directory (the session's, for a backend with
// none of its own) and the environment its child is made of (ChildEnv:
// variables it does not inherit do not count), or, remote, its URL and
// resolved headers. share = "always" makes it the name alone (the first
// session's environment serves all); "never" makes it the session.
func backendIdentity(b config.Backend, h *rendezvous.Hello) any {
	switch b.Share {
	case config.ShareAlways:
		return []string{b.Name, "always"}
	case config.ShareNever:
		return []any{b.Name, "never", h.PID, h.Cwd}
	}
	spec := b.Spec()
	if spec.URL != "" {
		return []any{b, "remote"}
	}
	cwd := spec.Cwd
	if cwd == "" {
		cwd = h.Cwd
	}
	env := backends.ChildEnv(spec, h.Environ)
	slices.Sort(env)
	cmd, _ := backends.CommandPath(spec, h.Environ)
	return []any{b, cmd, cwd, env}
}

// sessionOptions are the Mux options of the session of h.
func sessionOptions(h *rendezvous.Hello) []mux.Option {
	opts := []mux.Option{mux.WithEnviron(h.Environ, h.Cwd)}
	if h.Profile != "" {
		opts = append(opts, mux.WithProfile(h.Profile))
	}
	if h.Name != "" {
		opts = append(opts, mux.WithName(h.Name))
	}
	if h.ToolList != "" {
		opts = append(opts, mux.WithToolList(h.ToolList))
	}
	return opts
}
