package mux

import (
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// A backend that does not serve is told of the same way wherever the
// agent meets it: a request for one of its names, a request routed to it,
// the instructions. Each says which backend, its state, why, and what
// brings it back: a bare "unknown tool" leaves the user guessing which of
// their servers is missing and why.

// outage is why a backend does not serve, and its fix.
type outage struct {
	label  string // config.Backend.Label
	state  string // a verb phrase: "is failed", "needs a sign-in"
	reason string // on one line; may be ""
	fix    string // may be ""
}

// String reads as one sentence: `backend "x" is failed: REASON; FIX`.
func (o outage) String() string { return o.with("") }

// with is String with a remark after the label, such as its prefix.
func (o outage) with(remark string) string {
	var sb strings.Builder
	sb.WriteString(o.label)
	if remark != "" {
		sb.WriteString(" (" + remark + ")")
	}
	sb.WriteString(" " + o.state)
	sep := ": "
	if o.reason != "" {
		sb.WriteString(": " + o.reason)
		sep = "; "
	}
	if o.fix != "" {
		sb.WriteString(sep + o.fix)
	}
	return sb.String()
}

// downError is a request's error for a backend that does not serve.
type downError struct{ outage }

func (e *downError) Error() string { return e.String() }

// outageLocked is mem's outage as it is now; mem.mu is held.
func (mem *member) outageLocked() outage {
	o := outage{label: mem.spec.Label(), state: "is " + mem.state, reason: oneLine(mem.lastErr)}
	path := mem.m.cfg.Path
	switch mem.state {
	case stateNeedsLogin:
		// The command is the whole story; the reason it carries says it
		// again.
		o.state, o.reason = "needs a sign-in", ""
		o.fix = fmt.Sprintf("run `%s` in a terminal (it connects by itself then, without a restart)", oauthCommand(mem.spec.Name))
	case stateFailed:
		if mem.spec.Broken != "" {
			where := ""
			if !strings.Contains(o.reason, path) {
				where = " (" + path + ")"
			}
			o.fix = "fix it and save the config file" + where + ": mcp-mux reloads it"
			if config.NeedsAgentRestart(o.reason) {
				// A variable of mcp-mux's environment: saving the file
				// does not set it.
				o.fix = "a fix in the agent's config applies when the agent restarts, one in the config file" + where + " when it is saved"
			}
		} else {
			// A crash is not retried: only a new start, or a changed
			// entry (a reload restarts it), runs it again.
			o.fix = "once that is fixed, restart mcp-mux (or save a change to its entry in " + path + ": a reload starts it again)"
		}
	case stateRestarting, stateStarting:
		o.fix = "retry in a moment"
	}
	return o
}

// disabledOutage is the outage of a backend the config disables.
func disabledOutage(spec config.Backend, path string) outage {
	return outage{label: spec.Label(), state: "is disabled by config", reason: "disabled = true in " + path,
		fix: "remove that line (or set it to false) and save the file: mcp-mux reloads it"}
}

// oneLine is s, a reason of several lines, on one.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// unknownName is the error for a tool or prompt name the merged catalog
// lacks. A name a backend that is down offered is that backend's
// (-32603, naming it: the agent may retry later); any other is unknown
// (-32602), and if it has the prefix of a backend that is down or
// disabled, the error says which, why and the fix. Only the backends and
// tools of the agent's view v count: what it hides gets the answer of what
// does not exist.
func (m *Mux) unknownName(v *view, kind, name string) error {
	members := v.members(m.members())
	for _, mem := range members {
		if mem.serving() || !m.offersVisible(mem, kind, name) || (kind == "tool" && !v.hasTool(mem, name)) {
			continue
		}
		if _, err := mem.backend(); err != nil {
			return toAgentError(mem, err)
		}
	}
	msg := fmt.Sprintf("unknown %s %q", kind, name)
	sep := m.settings().ToolSeparator
	prefixes := map[string]bool{}
	var unprefixed []string
	for _, mem := range members {
		mem.mu.Lock()
		// One listed at rest has its whole catalog known: a name it
		// lacks is as unknown as one a running backend lacks.
		prefix, listed := mem.prefix, mem.listedLocked()
		o := mem.outageLocked()
		mem.mu.Unlock()
		prefixes[prefix] = true
		switch {
		case listed:
		case prefix == "":
			unprefixed = append(unprefixed, o.with(fmt.Sprintf("unprefixed: the %s may be one of its", kind)))
		case strings.HasPrefix(name, prefix+sep):
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg + ": " + o.with("prefix "+prefix+sep)}
		}
	}
	cfg := m.conf.Load().cfg
	for _, spec := range cfg.Backends {
		prefix := spec.EffectivePrefix()
		if spec.Disabled && prefix != "" && !prefixes[prefix] && !hiddenFromView(v, spec.Name) && strings.HasPrefix(name, prefix+sep) {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg + ": " + disabledOutage(spec, cfg.Path).with("prefix "+prefix+sep)}
		}
	}
	for _, u := range unprefixed {
		msg += "; " + u
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}
