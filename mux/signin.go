package mux

import (
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/backends/oauth"
)

// Remote backends that sign in with OAuth, as the agent sees them while
// they wait for `mcp-mux login NAME` (state "needs login"): their tools
// are not listed, and a call to a name under their prefix gets an error
// that names the command, whether the name was listed in an earlier run
// or not.

func oauthCommand(name string) string { return oauth.Command(name) }

// needsLoginFor is the error for a tool or prompt name that is under the
// prefix of a backend waiting for a login, or nil. An unprefixed backend
// that waits is named in the error of a name nobody has (hint).
func (m *Mux) needsLoginFor(kind, name string) (err error, hint string) {
	sep := m.settings().ToolSeparator
	var unprefixed []string
	for _, mem := range m.members() {
		mem.mu.Lock()
		state, prefix := mem.state, mem.prefix
		mem.mu.Unlock()
		if state != stateNeedsLogin {
			continue
		}
		if prefix == "" {
			unprefixed = append(unprefixed, mem.spec.Name)
			continue
		}
		if strings.HasPrefix(name, prefix+sep) {
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
				"%s %q is backend %q's, which needs a sign-in: run `%s` in a terminal (it connects by itself then, and its %ss are listed)",
				kind, name, mem.spec.Name, oauthCommand(mem.spec.Name), kind)}, ""
		}
	}
	for _, n := range unprefixed {
		hint += fmt.Sprintf("; backend %q, which needs a sign-in (run `%s`), may have it", n, oauthCommand(n))
	}
	return nil, hint
}
