package door

// Who a request comes from: the bearer tokens the HTTP door takes. [mux]
// http_token is the key to every view; each [[token]] (a team's member's)
// to its profiles only, the first its view at /mcp. A request for a view
// outside them is refused with a 403 that names nothing (not the profile
// asked for, not the token's own): a member learns no profile's name from
// the door. A session stays with the token that made it: another token's
// request on its Mcp-Session-Id is answered as for a session that does
// not exist (404), which is what the transport spec has a client do
// (initialize again, with its own token) and which tells a holder of
// another's session id nothing about it.

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// TokenHeader carries to the core the name of the [[token]] a request came
// with ("" for http_token, or where none is needed). The door sets it on
// every request, over whatever the agent sent.
const TokenHeader = "Mcp-Mux-Token"

// keys are the bearer tokens the door takes.
type keys struct {
	all     string         // http_token: every view
	members []config.Token // [[token]]s
}

func (k *keys) required() bool { return k.all != "" || len(k.members) > 0 }

// who is the [[token]] r's bearer token is (nil for http_token, or where
// none is required), or false if r has none the door takes. Every token
// is compared, in constant time, whichever matches: how long the check
// takes says nothing of which one, or how much of one, matched.
func (k *keys) who(r *http.Request) (*config.Token, bool) {
	if !k.required() {
		return nil, true
	}
	got, ok := bearer(r)
	if !ok {
		return nil, false
	}
	all := 0
	if k.all != "" {
		all = subtle.ConstantTimeCompare(got, []byte(k.all))
	}
	member := 0 // its place + 1
	for i := range k.members {
		eq := subtle.ConstantTimeCompare(got, []byte(k.members[i].Value))
		member = subtle.ConstantTimeSelect(eq, i+1, member)
	}
	switch {
	case member > 0:
		return &k.members[member-1], true
	case all == 1:
		return nil, true
	}
	return nil, false
}

// bearer is r's bearer token. The scheme is case-insensitive (RFC 9110
// §11.1): "bearer" is "Bearer".
func bearer(r *http.Request) ([]byte, bool) {
	scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, false
	}
	return []byte(strings.TrimSpace(got)), true
}

// tokenName is what the core is told of who: the [[token]]'s name, "" for
// http_token.
func tokenName(who *config.Token) string {
	if who == nil {
		return ""
	}
	return who.Name
}

// forbidden answers a request for a view its token may not use. It names
// nothing: the member may not know what is there.
func forbidden(w http.ResponseWriter) {
	http.Error(w, "Forbidden: this token may not use the view asked for (by the path /mcp/NAME or the "+ProfileHeader+" header); /mcp serves the token's own", http.StatusForbidden)
}

// BindToken makes the [[token]] called name ("" for http_token) the one
// whose requests reach the session; the first bound stays. The core binds
// it at the session's initialize, before the agent learns its id.
func (st *HTTPSession) BindToken(name string) {
	st.mu.Lock()
	if !st.tokenBound {
		st.token, st.tokenBound = name, true
	}
	st.mu.Unlock()
}

// TokenName is the name of the [[token]] the session is bound to: "" for
// http_token, or none.
func (st *HTTPSession) TokenName() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.token
}

// heldBy reports whether a request with the token called name may reach
// the session.
func (st *HTTPSession) heldBy(name string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.tokenBound || st.token == name
}
