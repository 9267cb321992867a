package mux

import "github.com/mcp-mux/mcp-mux/backends/oauth"

// Remote backends that sign in with OAuth, as the agent sees them while
// they wait for `mcp-mux login NAME` (state "needs login"): their tools
// are not listed, and a name under their prefix gets an error that names
// the command, whether the name was listed in an earlier run or not
// (unavailable.go).

func oauthCommand(name string) string { return oauth.Command(name) }
