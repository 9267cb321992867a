package mux

import (
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/subs"
)

// mux's own resources, listed after the backends' ones. Both are
// readable and subscribable; an update is sent when what they show changes.
const (
	uriSubscriptions = "mcp-mux://subscriptions"
	uriBackends      = "mcp-mux://backends"
	// uriInstructions + a backend's name is its instructions, whole: the
	// merged ones may cut them (instructions.go).
	uriInstructions = "mcp-mux://instructions/"
	// builtinBackend is the registry's backend name for mux's own
	// resources; the parentheses keep it apart from any configured name.
	builtinBackend = "(mcp-mux)"
)

func isBuiltin(uri string) bool { return uri == uriSubscriptions || uri == uriBackends }

// hasBuiltinScheme reports whether uri is in mux's own scheme (schemes are
// case-insensitive): no backend may list, template or serve such a URI.
func hasBuiltinScheme(uri string) bool {
	const scheme = "mcp-mux:"
	return len(uri) >= len(scheme) && strings.EqualFold(uri[:len(scheme)], scheme)
}

func (m *Mux) builtinResources() []*mcp.Resource {
	return []*mcp.Resource{
		{URI: uriSubscriptions, Name: "subscriptions", Title: "mcp-mux subscriptions", MIMEType: "application/json",
			Description: "The resource subscriptions this session holds through mcp-mux: session, backend, URI, since, mode (forwarded or local-only)."},
		{URI: uriBackends, Name: "backends", Title: "mcp-mux backends", MIMEType: "application/json",
			Description: "Each backend's state, pid, restarts, last error, capabilities, catalog counts, lines it printed on stdout that were not JSON-RPC, and whether it was late for the first list; the config generation (1 at start, +1 per reload applied) and when it was loaded."},
	}
}

// BackendStatus is one backend as mcp-mux://backends and `check` show it.
type BackendStatus struct {
	Name            string    `json:"name"`
	State           string    `json:"state"`
	Since           time.Time `json:"since"`
	PID             int       `json:"pid,omitempty"`
	Restarts        int       `json:"restarts"`
	LastError       string    `json:"last_error,omitempty"`
	Transport       string    `json:"transport,omitempty"` // while it runs: "stdio", or the HTTP transport that connected ("streamable", "sse")
	URL             string    `json:"url,omitempty"`       // a remote backend's, as it may be shown
	ProtocolVersion string    `json:"protocol_version,omitempty"`
	Server          string    `json:"server,omitempty"`
	// Subscribe and ListChanged are nil (null) while its capabilities
	// are unknown: it never initialized. CapabilitiesFrom says whose
	// they are: "running" (its process now), "last seen" (remembered, or
	// its last process) or "unknown".
	Subscribe        *bool    `json:"subscribe"`
	ListChanged      []string `json:"list_changed"`
	CapabilitiesFrom string   `json:"capabilities_from"`
	Resources        int      `json:"resources"`
	Templates        int      `json:"templates"`
	Tools            int      `json:"tools"`
	Prompts          int      `json:"prompts"`
	// SignIn is a remote backend's OAuth sign-in: "signed in" (by
	// Issuer), "needs login" (run `mcp-mux login NAME`), or "" when it
	// does not sign in (or its server has not asked yet).
	SignIn string `json:"sign_in,omitempty"`
	Issuer string `json:"issuer,omitempty"`
	// Late: it was still starting when the first list was answered
	// without it (first_list_wait); list_changed was sent when it was ready.
	Late bool `json:"late,omitempty"`
	// StdoutNoise: the lines the running backend printed on stdout that
	// were not JSON-RPC, skipped; the log has the first, then counts.
	StdoutNoise int `json:"stdout_noise,omitempty"`
}

// Ready reports whether the backend is serving.
func (s BackendStatus) Ready() bool { return s.State == stateReady }

func (mem *member) status() BackendStatus {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	st := BackendStatus{
		Name: mem.spec.Name, State: mem.state, Since: mem.since, Restarts: mem.restarts, LastError: mem.lastErr, Late: mem.late,
		Resources: mem.cat.nres, Templates: len(mem.cat.templates),
	}
	// What the agent sees of them: the filters hide the rest.
	tf, pf := nameFilter{mem.spec.Tools, mem.spec.ExcludeTools}, nameFilter{mem.spec.Prompts, mem.spec.ExcludePrompts}
	for _, t := range mem.cat.tools {
		if tf.admits(t.Name) {
			st.Tools++
		}
	}
	for _, p := range mem.cat.prompts {
		if pf.admits(p.Name) {
			st.Prompts++
		}
	}
	if mem.spec.URL != "" {
		st.URL = backends.ShownURL(mem.spec.URL)
	}
	if mem.state == stateNeedsLogin {
		st.SignIn = stateNeedsLogin
	}
	var init *mcp.InitializeResult
	// Without a process, what it said when last seen (remembered, or its
	// last process): what was never said is unknown, not "cannot".
	init, st.CapabilitiesFrom = mem.initResult, "last seen"
	if b := mem.b; b != nil {
		if ok, iss := b.SignedIn(); ok {
			st.SignIn, st.Issuer = "signed in", iss
		}
		st.PID = b.PID()
		st.StdoutNoise = b.StdoutNoise()
		st.Transport = b.Transport()
		init, st.CapabilitiesFrom = b.InitializeResult(), "running"
	}
	if init == nil {
		st.CapabilitiesFrom = "unknown"
		return st
	}
	st.ProtocolVersion = init.ProtocolVersion
	if init.ServerInfo != nil {
		st.Server = strings.TrimSpace(init.ServerInfo.Name + " " + init.ServerInfo.Version)
	}
	caps := init.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	sub := caps.Resources != nil && caps.Resources.Subscribe
	st.Subscribe, st.ListChanged = &sub, []string{}
	if caps.Tools != nil && caps.Tools.ListChanged {
		st.ListChanged = append(st.ListChanged, "tools")
	}
	if caps.Prompts != nil && caps.Prompts.ListChanged {
		st.ListChanged = append(st.ListChanged, "prompts")
	}
	if caps.Resources != nil && caps.Resources.ListChanged {
		st.ListChanged = append(st.ListChanged, "resources")
	}
	return st
}

// Status reports every enabled backend, in config order.
func (m *Mux) Status() []BackendStatus {
	members := m.members()
	out := make([]BackendStatus, 0, len(members))
	for _, mem := range members {
		out = append(out, mem.status())
	}
	return out
}

// sid is the reading session: over HTTP several agents share mcp-mux, and
// none may read another's subscriptions; v is its view (profile.go), which
// has only its backends.
func (m *Mux) readBuiltin(sid string, v *view, uri string) (*mcp.ReadResourceResult, bool) {
	var doc any
	switch uri {
	case uriSubscriptions:
		own := m.subs.Session(sid)
		if own == nil {
			own = []subs.Sub{}
		}
		doc = map[string]any{"subscriptions": own}
	case uriBackends:
		c := m.conf.Load()
		// goroutines: a leak shows as a count that does not come back
		// down once sessions and backends are gone.
		sessions := m.Sessions()
		if !v.all() {
			// An agent of a profile sees its own session, none of the
			// other agents' (which may be of other profiles).
			sessions = slices.DeleteFunc(sessions, func(st SessionStatus) bool { return st.ID != sid })
		}
		out := map[string]any{"generation": c.generation, "loaded": c.loaded, "backends": viewStatus(v, m.Status()), "sessions": sessions, "goroutines": runtime.NumGoroutine()}
		if !v.all() {
			out["profile"] = v.profileName()
		}
		doc = out
	default:
		if name, ok := strings.CutPrefix(uri, uriInstructions); ok && !hiddenFromView(v, name) {
			if text, ok := m.instructionsOf(name); ok {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/markdown", Text: text}}}, true
			}
		}
		return nil, false
	}
	data, _ := json.MarshalIndent(doc, "", "  ")
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(data)}}}, true
}

// builtinChanged tells the sessions subscribed to one of mux's own
// resources that it changed.
func (m *Mux) builtinChanged(uri string) {
	if m.subs.Count(builtinBackend, uri) == 0 {
		return
	}
	m.deliverUpdated(builtinBackend, &mcp.ResourceUpdatedNotificationParams{URI: uri})
}
