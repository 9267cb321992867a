package clientimport

// Claude Code's permission rules for the imported servers, carried over to
// the names their tools get through mcp-mux. Claude Code names an MCP tool
// mcp__<server>__<tool>, the server's name with every character but
// letters, digits, "_" and "-" made "_"; a rule is such a name, a whole
// server (mcp__<server>), or a glob in the tool's place (mcp__<server>__*,
// mcp__<server>__get_*). Through mcp-mux, registered as one server, a
// backend's tool is mcp__<mcp-mux's name>__<prefix>__<tool>, and the
// imported backends' prefix is their name. The rules are in the
// "permissions" of Claude Code's settings files: the user's
// ~/.claude/settings.json, and a project's .claude/settings.json and
// .claude/settings.local.json.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// PermissionRule is one rule of a settings file's "permissions".
type PermissionRule struct {
	List string // "allow", "deny" or "ask"
	Rule string // as written, e.g. "mcp__github__get_issue"
}

// PermissionLists are the lists of "permissions" that hold tool rules, in
// the order they are shown.
var PermissionLists = []string{"allow", "ask", "deny"}

// ClaudeCodeSettings lists the settings files where Claude Code may keep
// permission rules for servers of files: the user's (under home), and
// those of each project that files' Claude Code servers belong to, and of
// the directories in also (the current one, whose .mcp.json import looks
// for). A path is listed once.
func ClaudeCodeSettings(home string, files []*File, also ...string) []string {
	var out []string
	add := func(parts ...string) {
		if parts[0] == "" {
			return
		}
		if p := filepath.Join(parts...); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	add(home, ".claude", "settings.json")
	projects := slices.Clone(also)
	for _, f := range files {
		if f.Client != ClientClaudeCode {
			continue
		}
		projects = append(projects, f.Project)
		for _, s := range f.Servers {
			projects = append(projects, s.Project)
		}
	}
	for _, p := range projects {
		add(p, ".claude", "settings.json")
		add(p, ".claude", "settings.local.json")
	}
	return out
}

// SettingsProject is the project directory a settings file of
// ClaudeCodeSettings belongs to: "" for the user's.
func SettingsProject(path, home string) string {
	dir := filepath.Dir(filepath.Dir(path))
	if filepath.Base(filepath.Dir(path)) != ".claude" || (home != "" && samePath(dir, home)) {
		return ""
	}
	return dir
}

// ReadPermissionRules reads the MCP tool rules (those starting with
// "mcp__") of a Claude Code settings file.
func ReadPermissionRules(path string, data []byte) ([]PermissionRule, error) {
	var settings struct {
		Permissions map[string]json.RawMessage `json:"permissions"`
	}
	if err := json.Unmarshal(stripJSONC(data), &settings); err != nil {
		if _, err := decodeObject(path, stripJSONC(data)); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: its \"permissions\" is not an object of lists", path)
	}
	var out []PermissionRule
	for _, list := range PermissionLists {
		var rules []any
		if json.Unmarshal(settings.Permissions[list], &rules) != nil {
			continue
		}
		for _, r := range rules {
			if s, ok := r.(string); ok && strings.HasPrefix(s, "mcp__") {
				out = append(out, PermissionRule{List: list, Rule: s})
			}
		}
	}
	return out, nil
}

// ClaudeCodeServer is a server of a Claude Code file that was imported as
// Backend.
type ClaudeCodeServer struct {
	Name    string // as written in the file
	Project string // the project it belongs to, "" for the user's own
	Backend string
	Mux     string // mcp-mux's entry that serves it ("": the one CarryOver is given)
}

// ClaudeCodeServers are the Claude Code servers of files that res imports
// (kept commented out, a server gets no backend), in the order read.
func ClaudeCodeServers(res *Result) []ClaudeCodeServer {
	var out []ClaudeCodeServer
	for _, d := range res.sources {
		if d.file.Client != ClientClaudeCode || d.srv.Unusable != "" {
			continue
		}
		project := d.srv.Project
		if project == "" {
			project = d.file.Project
		}
		out = append(out, ClaudeCodeServer{Name: d.srv.Name, Project: project, Backend: d.backend})
	}
	return out
}

// ClaudeCodeToolName is how Claude Code writes a server's name in its
// tools' names (and so in rules).
func ClaudeCodeToolName(server string) string {
	return toolNameBadRe.ReplaceAllString(server, "_")
}

var toolNameBadRe = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// CarriedRule is a rule and what it becomes through mcp-mux: one rule per
// backend it may concern (a server's name in a project's file means the
// project's server of that name if there is one).
type CarriedRule struct {
	PermissionRule
	New []string
}

// CarryOver maps the rules of a settings file of project ("" for the
// user's: they apply in every project) that name one of servers to what
// they become when mcp-mux, registered in Claude Code as mux (or as a
// server's own Mux), serves the servers' backends. Rules for other servers, rules with a parenthesized
// specifier (which Claude Code ignores for MCP tools) and globs in the
// server's place are left out.
func CarryOver(rules []PermissionRule, project string, servers []ClaudeCodeServer, mux string) []CarriedRule {
	var out []CarriedRule
	for _, r := range rules {
		if strings.ContainsAny(r.Rule, "()") {
			continue
		}
		var match []ClaudeCodeServer
		tool := ""
		for _, s := range servers {
			name := ClaudeCodeToolName(s.Name)
			rest, ok := strings.CutPrefix(r.Rule, "mcp__"+name)
			if !ok || (rest != "" && !strings.HasPrefix(rest, "__")) {
				continue
			}
			if t := strings.TrimPrefix(rest, "__"); len(match) == 0 || t == tool {
				tool = t
				match = append(match, s)
			}
		}
		if project != "" {
			// The project's server of that name, or else the user's.
			own := slices.DeleteFunc(slices.Clone(match), func(s ClaudeCodeServer) bool { return s.Project != project })
			if len(own) == 0 {
				own = slices.DeleteFunc(slices.Clone(match), func(s ClaudeCodeServer) bool { return s.Project != "" })
			}
			match = own
		}
		if len(match) == 0 {
			continue
		}
		if tool == "" {
			tool = "*"
		}
		c := CarriedRule{PermissionRule: r}
		for _, s := range match {
			m := mux
			if s.Mux != "" {
				m = s.Mux
			}
			n := MuxToolRule(m, s.Backend, tool)
			if !slices.Contains(c.New, n) {
				c.New = append(c.New, n)
			}
		}
		out = append(out, c)
	}
	return out
}

// MuxToolRule is the rule for tool (or a glob) of backend, served with its
// name as prefix by mcp-mux registered in Claude Code as mux.
func MuxToolRule(mux, backend, tool string) string {
	return "mcp__" + ClaudeCodeToolName(mux) + "__" + backend + "__" + tool
}
