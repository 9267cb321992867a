package mux

import (
	"context"
	"fmt"
	"strings"
	"time"

)

// The initialize result: the go-sdk builds it (protocol, capabilities,
// serverInfo); mux adds the instructions, which are the backends' own, each
// under its backend's name and prefix, after one sentence of mux's about
// the prefixes ([mux] instructions replaces all of it).

// instructionsWait bounds how long initialize waits for backends to start
// so that their instructions are in it. Backends initialize only once the
// agent's initialize came (they are told its capabilities), so it waits
// about one backend start; a backend slower than this is left out (there
// is no notification to add it later).
const instructionsWait = 2 * time.Second

// waitInstructions merges the backends' instructions: at once when each
// backend has initialized or said them in an earlier run (instrcache.go),
// else after waiting (bounded) for their first start.
func (m *Mux) waitInstructions(ctx context.Context) string {
	if s, ok := m.knownInstructions(); ok {
		return s
	}
	if m.cfg.Mux.Instructions == "" {
		wctx, cancel := context.WithTimeout(ctx, instructionsWait)
		defer cancel()
		// Their initialize, not their first listing: that is all the
		// instructions need, and a listing can take a while.
		for _, mem := range m.members() {
			select {
			case <-mem.initialized:
			case <-wctx.Done():
			case <-m.ctx.Done():
			}
		}
	}
	return m.instructions()
}

// instructions merges the instructions of the backends that are ready.
func (m *Mux) instructions() string {
	s, _ := m.mergeInstructions(func(*member) (string, bool) { return "", false })
	return s
}

// knownInstructions merges the instructions of every backend, from its
// initialize or else from the last run, if each has one or the other.
func (m *Mux) knownInstructions() (string, bool) {
	return m.mergeInstructions(func(mem *member) (string, bool) { return m.instr.lookup(mem.spec) })
}

// mergeInstructions merges each backend's instructions: from its
// initialize result, else from earlier (false if earlier does not know
// them either: then ok is false).
func (m *Mux) mergeInstructions(earlier func(*member) (string, bool)) (merged string, ok bool) {
	if m.cfg.Mux.Instructions != "" {
		return m.cfg.Mux.Instructions + m.notRunning(), true
	}
	ok = true
	var sb strings.Builder
	fmt.Fprintf(&sb, "This server is mcp-mux: it combines several MCP servers. The tools and prompts of each carry its prefix (`<prefix>%s<name>`); resource URIs are those of the server that owns them.", m.cfg.Mux.ToolSeparator)
	for _, mem := range m.members() {
		mem.mu.Lock()
		r, prefix := mem.initResult, mem.prefix
		mem.mu.Unlock()
		var text string
		if r != nil {
			text = r.Instructions
		} else if t, known := earlier(mem); known {
			text = t
		} else {
			ok = false
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		names := "unprefixed"
		if prefix != "" {
			names = "prefixed `" + prefix + m.cfg.Mux.ToolSeparator + "`"
		}
		fmt.Fprintf(&sb, "\n\n## %s (tools and prompts %s)\n\n%s", mem.spec.Name, names, strings.TrimSpace(text))
	}
	sb.WriteString(m.notRunning())
	return sb.String(), ok
}

// notRunning tells the agent (and so the user) which backends failed and
// why, as the instructions' last part: a user whose server is missing
// reads it there, and saving a fixed config file starts it.
func (m *Mux) notRunning() string {
	var sb strings.Builder
	for _, mem := range m.members() {
		mem.mu.Lock()
		state, o := mem.state, mem.outageLocked()
		mem.mu.Unlock()
		if state != stateFailed && state != stateNeedsLogin {
			continue
		}
		if sb.Len() == 0 {
			sb.WriteString("\n\n## Servers that are not running")
		}
		if state == stateNeedsLogin {
			fmt.Fprintf(&sb, "\n\n- %s is not running: it needs a sign-in; the user runs `%s` in a terminal, and it connects by itself then (no restart)", o.label, oauthCommand(mem.spec.Name))
			continue
		}
		// The same reason and fix as the error of a request for it.
		fmt.Fprintf(&sb, "\n\n- %s is not running: %s; %s", o.label, o.reason, o.fix)
	}
	return sb.String()
}
