package mux

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mcp-mux/mcp-mux/mux/agents"
)

// The initialize result: the go-sdk builds it (protocol, capabilities,
// serverInfo); mux adds the instructions, which are the backends' own, each
// under its backend's name and prefix, after one sentence of mux's about
// the prefixes ([mux] instructions replaces all of it).

// instructionsWait bounds how long initialize waits for backends to start
// so that their instructions are in it, for an agent whose patience is
// not known. Backends initialize only once the agent's initialize came
// (they are told its capabilities), so it waits about one backend start;
// a backend slower than this is left out (there is no notification to add
// it later).
const instructionsWait = 2 * time.Second

// patience is how long initialize may wait for the backends' instructions
// for agent a. One that waits for its servers, with a known patience,
// gets up to a little less than that: Claude Code gives a server 5 s
// (MCP_CONNECT_TIMEOUT_MS) before its first request. (One that does not
// wait gets what its first list gets, firstListBy: the backends start
// side by side, so a wait for their instructions costs the list nothing.)
func patience(a agents.Agent) time.Duration {
	if a.Patience > time.Second {
		return a.Patience - time.Second
	}
	return instructionsWait
}

// hurried is how much of its patience mcp-mux may use to answer the
// initialize and the first list of agent a, if a does not wait for its
// servers (Codex CLI sends its first request with the tools listed within
// its patience, a second): most of it, so that the backends starting side
// by side with mcp-mux make the list as they would make the agent's own
// first request directly; the rest is for the answers to reach the agent.
func hurried(a agents.Agent) (time.Duration, bool) {
	if a.Patience > 0 && !a.Waits {
		return a.Patience * 8 / 10, true
	}
	return 0, false
}

// waitInstructions merges the backends' instructions: at once when each
// backend has initialized or said them in an earlier run (instrcache.go),
// else after waiting (bounded by agent a's patience) for their first
// start; then those of every backend that has initialized by the end of
// the wait, and those remembered of the others, are in it.
// Only the backends of the agent's view v count (profile.go).
func (m *Mux) waitInstructions(ctx context.Context, v *view, a agents.Agent, by time.Time) string {
	s, ok := m.knownInstructions(v)
	if ok || m.cfg.Mux.Instructions != "" {
		return s
	}
	wctx, cancel := context.WithTimeout(ctx, patience(a))
	if !by.IsZero() {
		wctx, cancel = context.WithDeadline(ctx, by)
	}
	defer cancel()
	// Their initialize, not their first listing: that is all the
	// instructions need, and a listing can take a while.
	for _, mem := range v.members(m.members()) {
		select {
		case <-mem.initialized:
		case <-wctx.Done():
		case <-m.ctx.Done():
		}
	}
	return m.instructions(v)
}

// instructions merges the instructions known now: of each backend of v
// that has initialized, else as it said them in an earlier run.
func (m *Mux) instructions(v *view) string {
	s, _ := m.knownInstructions(v)
	return s
}

// knownInstructions merges the instructions of every backend, from its
// initialize or else from the last run, if each has one or the other.
func (m *Mux) knownInstructions(v *view) (string, bool) {
	return m.mergeInstructions(v, func(mem *member) (string, bool) { return m.instr.lookup(mem.spec) })
}

// mergeInstructions merges each backend's instructions: from its
// initialize result, else from earlier (false if earlier does not know
// them either: then ok is false).
func (m *Mux) mergeInstructions(v *view, earlier func(*member) (string, bool)) (merged string, ok bool) {
	if m.cfg.Mux.Instructions != "" {
		return m.cfg.Mux.Instructions + m.notRunning(v) + m.filteredOut(v), true
	}
	ok = true
	var sb strings.Builder
	fmt.Fprintf(&sb, "This server is mcp-mux: it combines several MCP servers. The tools and prompts of each carry its prefix (`<prefix>%s<name>`); resource URIs are those of the server that owns them.", m.cfg.Mux.ToolSeparator)
	var parts []instructionPart
	for _, mem := range v.members(m.members()) {
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
		if text = strings.TrimSpace(text); text == "" {
			continue
		}
		names := "unprefixed"
		if prefix != "" {
			names = "prefixed `" + prefix + m.cfg.Mux.ToolSeparator + "`"
		}
		parts = append(parts, instructionPart{head: fmt.Sprintf("\n\n## %s (tools and prompts %s)\n\n", mem.spec.Name, names), text: text, name: mem.spec.Name})
	}
	tail := m.notRunning(v) + m.filteredOut(v)
	fitInstructions(parts, maxInstructions-utf16Len(sb.String())-utf16Len(tail))
	for _, p := range parts {
		sb.WriteString(p.head + p.text)
	}
	sb.WriteString(tail)
	return sb.String(), ok
}

// instructionsOf is the whole instructions of the backend called name, as
// it said them last (this run, or the last one).
func (m *Mux) instructionsOf(name string) (string, bool) {
	mem, ok := m.memberNamed(name)
	if !ok {
		return "", false
	}
	mem.mu.Lock()
	r := mem.initResult
	mem.mu.Unlock()
	if r != nil {
		return r.Instructions, r.Instructions != ""
	}
	return m.instr.lookup(mem.spec)
}

// maxInstructions is what the merged instructions must fit in: Claude Code
// cuts a server's instructions at 4,096 characters (UTF-16 code units, as
// JavaScript counts; CLAUDE_CODE_MAX_MCP_DESCRIPTION_LENGTH), and so one
// backend's long text would cost the others theirs.
const maxInstructions = 4096

// instructionPart is one backend's section of the instructions.
type instructionPart struct {
	head, text, name string
}

// fitInstructions cuts the parts' texts so that, with their heads, they
// take at most budget: each a fair share (what a shorter one leaves goes
// to the longer ones), cut at the end of a sentence, with where the whole
// text is.
func fitInstructions(parts []instructionPart, budget int) {
	total := 0
	for _, p := range parts {
		total += utf16Len(p.head) + utf16Len(p.text)
	}
	if total <= budget {
		return
	}
	order := make([]int, len(parts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return utf16Len(parts[a].text) - utf16Len(parts[b].text) })
	left := budget
	for _, i := range order {
		left -= utf16Len(parts[i].head)
	}
	for n, i := range order {
		share := max(left/(len(order)-n), 0)
		p := &parts[i]
		if utf16Len(p.text) > share {
			p.text = cutAtSentence(p.text, share-utf16Len(morePointer(p.name)), morePointer(p.name))
		}
		left -= utf16Len(p.text)
	}
}

// morePointer is what ends a backend's cut instructions: where the whole
// text is (readBuiltin serves it).
func morePointer(name string) string {
	return " […] The whole text: read the resource " + uriInstructions + name + "."
}

// cutAtSentence is text cut to at most n code units at the end of its last
// whole sentence (or line) within them, then more; only more if none fits.
func cutAtSentence(text string, n int, more string) string {
	if n <= 0 {
		return strings.TrimSpace(more)
	}
	units := 0
	end := 0
	for i, r := range text {
		units += utf16.RuneLen(r)
		if units > n {
			break
		}
		if r == '\n' || (r == '.' || r == '!' || r == '?') && (i+1 == len(text) || text[i+1] == ' ' || text[i+1] == '\n') {
			end = i + utf8.RuneLen(r)
		}
	}
	return strings.TrimSpace(text[:end]) + more
}

// utf16Len is how long s is to JavaScript.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// notRunning tells the agent (and so the user) which backends failed and
// why, as the instructions' last part: a user whose server is missing
// reads it there, and saving a fixed config file starts it.
func (m *Mux) notRunning(v *view) string {
	var sb strings.Builder
	for _, mem := range v.members(m.members()) {
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
