package clientimport

// What `import --apply` changes in the clients' own files: each servers
// object moved to mcp-mux loses those servers and gets one mcp-mux entry
// in their place (jsonedit.go keeps every other byte), and Claude Code's
// settings get the permission rules that import proposes.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// IsMuxEntry reports whether s launches mcp-mux: its command is exe (the
// running mcp-mux, its symlinks resolved), found as the client would find
// it (a bare name on PATH, a link followed), or is named mcp-mux. Such an
// entry (mcp-mux's own, as --apply writes it) is never imported: mcp-mux
// would run itself.
func IsMuxEntry(s *Server, exe string) bool {
	if s.Remote() || s.Command == "" {
		return false
	}
	base := strings.ToLower(filepath.Base(strings.ReplaceAll(s.Command, `\`, "/")))
	if strings.TrimSuffix(base, ".exe") == "mcp-mux" {
		return true
	}
	if exe == "" {
		return false
	}
	cmd := s.Command
	if !strings.ContainsAny(cmd, `/\`) {
		p, err := exec.LookPath(cmd)
		if err != nil {
			return false
		}
		cmd = p
	}
	if p, err := filepath.EvalSymlinks(cmd); err == nil {
		cmd = p
	}
	if samePath(cmd, exe) {
		return true
	}
	a, err1 := os.Stat(cmd)
	b, err2 := os.Stat(exe)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// StaysWhy says why s stays in its client's file rather than move to
// mcp-mux, "" when it moves.
func StaysWhy(s *Server) string {
	switch {
	case s.Unusable != "":
		return "mcp-mux cannot run it as written (" + s.Unusable + ")"
	case s.ProjectGone:
		return "its project directory no longer exists"
	}
	return ""
}

// ScopeOf is the project that server s of f is for: "" for the user's own.
func ScopeOf(f *File, s *Server) string {
	if s.Project != "" {
		return s.Project
	}
	return f.Project
}

// ProfileFor names the profile that gets the servers of client for
// project ("" for the user's own servers), and the clientInfo names
// (globs) that get it by default: only a client's user-level profile has
// them, as two profiles claiming one agent is a mistake; a project's is
// asked for by its launch line.
func ProfileFor(client, project string) (name string, clients []string) {
	switch client {
	case ClientClaudeDesktop:
		name, clients = "claude-desktop", []string{"claude-ai"}
	case ClientClaudeCode:
		name, clients = "claude-code", []string{"claude-code"}
	case ClientCursor:
		name, clients = "cursor", []string{"cursor*"}
	case ClientVSCode:
		// "Visual Studio Code - Insiders" too.
		name, clients = "vscode", []string{"Visual Studio Code*"}
	default:
		return "", nil
	}
	if project == "" {
		return name, clients
	}
	return name + "-" + projectBase(project), nil
}

// projectBase is the base name of a project's directory, as a name.
func projectBase(project string) string {
	base := strings.Trim(nameBadRe.ReplaceAllString(filepath.Base(project), "-"), "-")
	if base == "" {
		base = "project"
	}
	return base
}

// EntryFor names mcp-mux's entry among the servers of client for project
// ("" for the user's own), as mux is its name among the user's: Claude
// Code runs one server per name, a project's (local scope) in place of
// the user's of that name, and the user's servers run in every project
// too. So a project's entry there has a name of its own (and a profile of
// only that project's servers) beside the user's: mcp-mux-BASENAME, or
// with -2, -3... when taken(name) says the project has a server so
// named. Elsewhere the entry is mux.
func EntryFor(client, project, mux string, taken func(string) bool) string {
	if client != ClientClaudeCode || project == "" {
		return mux
	}
	base := mux + "-" + projectBase(project)
	name := base
	for n := 2; taken(name); n++ {
		name = fmt.Sprintf("%s-%d", base, n)
	}
	return name
}

// ServersEdit is what becomes of one servers object of a client's file:
// the servers named Remove (mcp-mux's older entries among them) leave it,
// and Entry, mcp-mux's, named Name, takes the place of the first of them.
type ServersEdit struct {
	Name   string
	Remove []string
	Entry  any
}

// RewriteServers is f's file (data, as read) with edits made, keyed by
// the project of ~/.claude.json whose servers they are ("" for the
// servers at the top of the file); and what changed, for Undo.
func RewriteServers(f *File, data []byte, edits map[string]ServersEdit) ([]byte, []Change, error) {
	root, err := scanJSONC(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	var splices []splice
	var changes []Change
	for _, project := range slices.Sorted(maps.Keys(edits)) {
		e := edits[project]
		path := []string{"mcpServers"}
		switch {
		case project != "":
			path = []string{"projects", project, "mcpServers"}
		case f.Client == ClientVSCode && root.get("servers") == nil:
			path = []string{"mcp", "servers"} // settings.json
		case f.Client == ClientVSCode:
			path = []string{"servers"}
		}
		obj := root.lookup(path...)
		if obj == nil || obj.kind != '{' {
			return nil, nil, fmt.Errorf("%s: %s is not an object", f.Path, strings.Join(path, "."))
		}
		remove := map[string]bool{e.Name: true}
		for _, r := range e.Remove {
			remove[r] = true
		}
		sp, member, ok := replaceMembers(data, obj, remove, e.Name, e.Entry)
		if !ok {
			continue
		}
		splices = append(splices, sp)
		c := Change{At: path, Before: string(data[obj.start:obj.end]), After: spliced(data, obj, sp), Added: []string{member}}
		c.Indent, _ = indentUnit(data, obj)
		for _, m := range obj.members {
			if remove[m.key] {
				c.Removed = append(c.Removed, string(data[m.keyStart:m.val.end]))
			}
		}
		changes = append(changes, c)
	}
	return applySplices(data, splices), changes, nil
}

// AddPermissionRules is a Claude Code settings file (data, as read from
// path) with the new rules of carried added to the end of their lists,
// each once and only when the list lacks it; the rules added; and what
// changed, for Undo.
func AddPermissionRules(path string, data []byte, carried []CarriedRule) ([]byte, []PermissionRule, []Change, error) {
	root, err := scanJSONC(data)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	perms := root.get("permissions")
	var splices []splice
	var added []PermissionRule
	var changes []Change
	for _, list := range PermissionLists {
		arr := perms.get(list)
		if arr == nil || arr.kind != '[' {
			continue
		}
		have := map[string]bool{}
		for _, m := range arr.members {
			var s string
			if json.Unmarshal(data[m.val.start:m.val.end], &s) == nil {
				have[s] = true
			}
		}
		var items []string
		for _, c := range carried {
			if c.List != list {
				continue
			}
			for _, n := range c.New {
				if have[n] {
					continue
				}
				have[n] = true
				q, _ := json.Marshal(n)
				items = append(items, string(q))
				added = append(added, PermissionRule{List: list, Rule: n})
			}
		}
		if len(items) > 0 {
			sp := appendElements(data, arr, items)
			splices = append(splices, sp)
			changes = append(changes, Change{At: []string{"permissions", list}, Before: string(data[arr.start:arr.end]), After: spliced(data, arr, sp), Added: items})
		}
	}
	return applySplices(data, splices), added, changes, nil
}
