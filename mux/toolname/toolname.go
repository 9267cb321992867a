// Package toolname fits the tool names mcp-mux exposes to the limit of the
// agent that shows them to its model. An agent names an MCP server's tool
// with the server's name around it (Gemini CLI: mcp_SERVER_TOOL) and cuts,
// or sends the model API, a name past its limit (mux/agents). Through
// mcp-mux the tool's name is longer than directly by the name the agent
// registered mcp-mux under and the backend's prefix, so a name that fits
// directly may not fit through mcp-mux: Fit gives each such name a shorter
// one.
//
// The scheme keeps the tool's own name whole where it can, since that is
// what says what the tool does: first the backend's prefix loses its last
// characters, just enough for the name to fit, but never so many that it
// could be the start of another backend's prefix; only when the tool's own
// name is too long even so is it cut too, and then it ends in "_" and a
// short hash of the full name, so that two cut names stay apart. A name
// depends only on the tool's own full name, the configured prefixes and
// the agent, not on the order backends list in; a shortened name that
// would be another tool's (what the agent shows of it) gets a hash, or a
// longer one, in the order of the full names.
package toolname

import (
	"crypto/sha256"
	"encoding/base32"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mcp-mux/mcp-mux/mux/agents"
)

// Name is a tool's name as mcp-mux exposes it, in parts: Prefix, Sep and
// Tool (its own name, or the one an override gives it). Prefix is "" for
// a backend without one, and then Sep is not part of the name.
type Name struct {
	Prefix, Sep, Tool string
}

// String is the full name.
func (n Name) String() string {
	if n.Prefix == "" {
		return n.Tool
	}
	return n.Prefix + n.Sep + n.Tool
}

// Split is full, a name exposed as tool (its part without the prefix)
// with the separator sep, in parts.
func Split(full, tool, sep string) Name {
	prefix, ok := strings.CutSuffix(full, sep+tool)
	if !ok || prefix == "" || full == tool {
		return Name{Tool: full}
	}
	return Name{Prefix: prefix, Sep: sep, Tool: tool}
}

// hashLen is how many characters of the hash a cut name ends with at
// first: 20 bits, and the cut part before it, keep two cut names of one
// agent apart; a longer one is taken only where they would not be.
const hashLen = 4

// minBudget is the fewest characters a shortened name can have: with less
// room (a registered name so long that hardly anything fits after it)
// nothing is shortened.
const minBudget = 2 + hashLen

// Fit is the name to expose, for agent a, which registered mcp-mux as
// server, instead of each of names whose name the agent shows would pass
// its limit: a map from the full name to the shorter one, nil when every
// name fits (or the agent's limit is not known). prefixes are the
// prefixes of every configured backend, ready or not; reserved are names
// no tool may take (mcp-mux's own tools').
func Fit(a agents.Agent, server string, names []Name, prefixes, reserved []string) map[string]string {
	if a.ToolName == nil || a.NameLimit <= 0 {
		return nil
	}
	budget := a.NameLimit - runes(a.ToolName(server, ""))
	if budget < minBudget {
		return nil
	}
	var long []Name
	for _, n := range names {
		if runes(n.String()) > budget {
			long = append(long, n)
		}
	}
	if len(long) == 0 {
		return nil
	}
	// What the agent shows of each name that stays, which no shortened
	// name's may equal (it sanitizes names: a.b and a_b are one to it).
	taken := map[string]bool{}
	for _, n := range names {
		if full := n.String(); runes(full) <= budget {
			taken[a.ToolName(server, full)] = true
		}
	}
	for _, r := range reserved {
		taken[a.ToolName(server, r)] = true
	}
	slices.SortFunc(long, func(x, y Name) int { return strings.Compare(x.String(), y.String()) })
	out := make(map[string]string, len(long))
	for _, n := range long {
		full := n.String()
		if _, dup := out[full]; dup {
			continue
		}
		short := uniquePrefix(n.Prefix, prefixes)
		name := cutPrefix(n, short, budget)
		for h := hashLen; name == "" || taken[a.ToolName(server, name)]; h += 2 {
			if h > maxHash {
				break // past 260 bits: cannot happen
			}
			name = hashed(n, short, budget, h)
		}
		taken[a.ToolName(server, name)] = true
		out[full] = name
	}
	return out
}

// uniquePrefix is the shortest start of prefix that is the start of no
// other of prefixes (prefix itself if there is none: another backend has
// the same prefix, or one that begins with all of it).
func uniquePrefix(prefix string, prefixes []string) string {
	if prefix == "" {
		return ""
	}
	if n := 0; slices.ContainsFunc(prefixes, func(p string) bool {
		if p == prefix {
			n++
		}
		return n > 1
	}) {
		return prefix // two backends share it: no start of it is one's
	}
	for i := range prefix {
		if i == 0 {
			continue
		}
		start, unique := prefix[:i], true
		for _, p := range prefixes {
			if p != prefix && strings.HasPrefix(p, start) {
				unique = false
				break
			}
		}
		if unique {
			return start
		}
	}
	return prefix
}

// cutPrefix is n with its prefix cut to fit budget, down to short at the
// least, or "" if that is not enough (or n has no prefix). A prefix cut
// after a '-' or '_' loses that too, so the separator stays the one
// boundary.
func cutPrefix(n Name, short string, budget int) string {
	if n.Prefix == "" {
		return ""
	}
	keep := budget - runes(n.Sep) - runes(n.Tool)
	if keep < runes(short) {
		return ""
	}
	p := cutRunes(n.Prefix, keep)
	for len(p) > len(short) && strings.ContainsRune("-_", rune(p[len(p)-1])) {
		p = p[:len(p)-1]
	}
	return p + n.Sep + n.Tool
}

// hashed is n cut to fit budget: the short prefix, the separator and as
// much of the tool's name as fits before "_" and h characters of its
// hash; a name with no prefix (or no room for the tool's) is the full
// name cut so.
func hashed(n Name, short string, budget, h int) string {
	sum := hashOf(n.String())[:h]
	if n.Prefix != "" {
		head := short + n.Sep
		if room := budget - runes(head) - 1 - h; room >= 1 {
			return head + strings.TrimRight(cutRunes(n.Tool, room), "-_") + "_" + sum
		}
	}
	return strings.TrimRight(cutRunes(n.String(), budget-1-h), "-_") + "_" + sum
}

// maxHash is the length of hashOf's result.
const maxHash = 52

// hashOf is the full name's hash in characters every agent keeps: lower
// case letters and digits.
func hashOf(full string) string {
	sum := sha256.Sum256([]byte(full))
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// cutRunes is the first n characters of s.
func cutRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
