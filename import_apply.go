package main

// `mcp-mux import --apply` and `--undo`: import, then move each client
// over to mcp-mux (its servers replaced by one mcp-mux entry asking for
// the client's profile), saving every file changed beside it; and put the
// saved copies back.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcp-mux/mcp-mux/mux/clientimport"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// readFile is a client's file as parsed, with the bytes it was parsed
// from: a file that differs from them when it is written is left alone.
type readFile struct {
	*clientimport.File
	data []byte
	own  []clientimport.Server // its entries that launch mcp-mux, out of Servers
}

// moved is a server that --apply moves to mcp-mux.
type moved struct {
	file    *readFile
	srv     *clientimport.Server
	scope   string // its project, "" for the user's own
	backend string // the backend it is in mcp-mux's config
}

// scopeKey names the servers of one client for one project (or the user).
type scopeKey struct{ client, project string }

// plannedWrite is a file --apply changes: old is what it holds now (nil:
// it does not exist yet).
type plannedWrite struct {
	path     string
	old, new []byte
	what     string
	changes  []clientimport.Change // in a client's JSON file, for --undo
}

func importApply(c *cli.Context, files []*readFile, settingsDirs []string) error {
	stderr := c.App.ErrWriter
	home, _ := os.UserHomeDir()
	manifest, err := undoManifestPath()
	if err != nil {
		return cli.Exit("mcp-mux import --apply: "+err.Error(), 1)
	}
	// What earlier runs changed stays recorded beside what this one does.
	record, err := readManifest(manifest)
	if err != nil {
		return cli.Exit("mcp-mux import --apply: nothing was changed: the record of earlier runs, for --undo, cannot be read: "+err.Error(), 1)
	}
	cfgPath := c.String("output")
	if cfgPath == "" {
		cfgPath = config.UserPath(os.Getenv)
	}
	if abs, err := filepath.Abs(cfgPath); err == nil {
		cfgPath = abs
	}
	cfgData, err := os.ReadFile(cfgPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return cli.Exit("mcp-mux import --apply: "+pathError(cfgPath, err), 1)
	}
	cfgExisted := err == nil
	ex, err := clientimport.ReadExisting(cfgPath, cfgData)
	if err != nil {
		return cli.Exit("mcp-mux import --apply: the config to add to is not valid TOML, so nothing was changed: "+err.Error(), 1)
	}

	// What moves: the servers mcp-mux can run, of the clients it knows.
	var notes []string
	var moving []*clientimport.File
	var all []moved
	for _, f := range files {
		if f.Client == clientimport.ClientOther {
			notes = append(notes, fmt.Sprintf("left alone %s: not a file of a client mcp-mux knows", f.Path))
			continue
		}
		if isSharedFile(f.File) {
			if len(f.Servers) > 0 {
				notes = append(notes, fmt.Sprintf("left alone %s: a project's .mcp.json is shared with the project's other users (it is checked in with the project): left as is; its servers keep running directly", f.Path))
			}
			continue
		}
		m := *f.File
		m.Servers = nil
		for i := range f.Servers {
			s := f.Servers[i]
			if why := clientimport.StaysWhy(&s); why != "" {
				notes = append(notes, fmt.Sprintf("kept       %q in %s: %s", s.Name, f.Path, why))
				continue
			}
			m.Servers = append(m.Servers, s)
		}
		if len(m.Servers) > 0 {
			moving = append(moving, &m)
			for i := range m.Servers {
				all = append(all, moved{file: f, srv: &m.Servers[i], scope: clientimport.ScopeOf(&m, &m.Servers[i])})
			}
		}
	}
	if len(all) == 0 {
		for _, n := range notes {
			fmt.Fprintln(stderr, "  "+n)
		}
		fmt.Fprintln(stderr, "\nmcp-mux import --apply: nothing to move: the clients' files hold only mcp-mux's own entries and servers that stay where they are; nothing was changed.")
		return nil
	}

	// Backends the config has already, the same, are not added again.
	first := clientimport.RenderBeside(moving, ex.Names)
	same := ex.SameBackends(first)
	var fresh []*clientimport.File
	movingOf := map[*clientimport.File]*clientimport.File{}
	idx := 0
	for _, m := range moving {
		n := *m
		n.Servers = nil
		for i := range m.Servers {
			if old, ok := same[first.BackendOf(m, &m.Servers[i])]; ok {
				all[idx].backend = old
			} else {
				n.Servers = append(n.Servers, m.Servers[i])
			}
			idx++
		}
		if len(n.Servers) > 0 {
			fresh = append(fresh, &n)
			movingOf[&n] = m
		}
	}
	res := clientimport.RenderBeside(fresh, ex.Names)
	for _, n := range fresh {
		m := movingOf[n]
		for i := range n.Servers {
			for j := range all {
				if all[j].srv.Name == n.Servers[i].Name && all[j].srv.Project == n.Servers[i].Project && all[j].file.Path == m.Path && all[j].backend == "" {
					all[j].backend = res.BackendOf(n, &n.Servers[i])
					break
				}
			}
		}
	}

	// One profile per client and project. Claude Code runs the user's
	// entry in every project beside a project's own (named apart, see
	// EntryFor), so a project's profile there has only the project's
	// servers; elsewhere a project's entry stands in for the user's, and
	// its profile has the user's servers too.
	exe, _ := muxCommand()
	names := map[scopeKey]string{}
	entries := map[scopeKey]string{}
	taken := map[string]bool{}
	var order []scopeKey
	for _, m := range all {
		k := scopeKey{m.file.Client, m.scope}
		if _, ok := names[k]; ok {
			continue
		}
		base, _ := clientimport.ProfileFor(k.client, k.project)
		name := base
		for n := 2; taken[name]; n++ {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		taken[name] = true
		names[k] = name
		entries[k] = clientimport.EntryFor(k.client, k.project, muxServerName, func(n string) bool {
			return n == muxServerName || claudeCodeServerIn(files, all, k.project, n)
		})
		order = append(order, k)
	}
	var profiles []clientimport.Profile
	for _, k := range order {
		name := names[k]
		_, clients := clientimport.ProfileFor(k.client, k.project)
		p := clientimport.Profile{Name: name, Clients: clients}
		var paths []string
		add := func(client, project string) {
			if project != k.project {
				// The user's: those in the config already, and those moving now.
				user, _ := clientimport.ProfileFor(client, "")
				if old := ex.Profiles[user]; old != nil {
					p.Backends = appendNew(p.Backends, old.Backends...)
				}
			}
			for _, m := range all {
				if project != k.project && slices.ContainsFunc(all, func(o moved) bool {
					return o.file.Client == client && o.scope == k.project && o.srv.Name == m.srv.Name
				}) {
					continue // the project's server of that name replaces the user's there
				}
				if m.file.Client == client && m.scope == project {
					p.Backends = appendNew(p.Backends, m.backend)
					if !slices.Contains(paths, m.file.Path) {
						paths = append(paths, m.file.Path)
					}
				}
			}
		}
		withUser := k.project != "" && k.client != clientimport.ClientClaudeCode
		if withUser {
			add(k.client, "")
		}
		add(k.client, k.project)
		switch {
		case withUser:
			p.About = fmt.Sprintf("%s's servers for the project %s (and the user's), from %s", k.client, k.project, strings.Join(paths, " and "))
		case k.project != "":
			p.About = fmt.Sprintf("%s's servers for the project %s, from %s (its entry %s runs there beside the user's, %s)", k.client, k.project, strings.Join(paths, " and "), entries[k], muxServerName)
		default:
			p.About = fmt.Sprintf("%s's servers, from %s", k.client, strings.Join(paths, " and "))
		}
		profiles = append(profiles, p)
	}

	var plan []plannedWrite
	var backendsTOML []byte
	if len(res.Backends) > 0 {
		backendsTOML = res.TOML
	}
	newCfg, said, err := clientimport.AddToConfig(cfgData, backendsTOML, profiles, ex)
	if err != nil {
		return cli.Exit("mcp-mux import --apply: nothing was changed: "+err.Error(), 1)
	}
	if !bytes.Equal(newCfg, cfgData) {
		what := fmt.Sprintf("%d backend%s added", len(res.Backends), plural(len(res.Backends)))
		if len(said) > 0 {
			what += "; " + strings.Join(said, "; ")
		}
		var old []byte
		if cfgExisted {
			old = cfgData
		}
		plan = append(plan, plannedWrite{path: cfgPath, old: old, new: newCfg, what: what})
	}

	// Each client's file: its servers out, mcp-mux's entry in (an older
	// entry of mcp-mux's there, by that name or mcp-mux, out too).
	for _, f := range files {
		edits := map[string]clientimport.ServersEdit{}
		var said []string
		for _, m := range all {
			if m.file != f {
				continue
			}
			e := edits[m.srv.Project]
			if e.Entry == nil {
				k := scopeKey{f.Client, m.scope}
				name := names[k]
				args := []string{"-c", cfgPath, "--profile", name}
				if entries[k] != muxServerName {
					// The agent puts the entry's name in the names of its
					// tools: mcp-mux fits them to its limit with it.
					args = append(args, "--name", entries[k])
				}
				reg := registration{Command: exe, Args: args, Env: entryEnv(all, k)}
				if f.Client == clientimport.ClientVSCode {
					reg.Type = "stdio"
				}
				e.Entry, e.Name = reg, entries[k]
				for _, o := range f.own {
					if o.Project == m.srv.Project && (o.Name == e.Name || o.Name == muxServerName) {
						e.Remove = append(e.Remove, o.Name)
					}
				}
				where := ""
				if e.Name != muxServerName {
					where = fmt.Sprintf(" as %q", e.Name)
				}
				if m.srv.Project != "" {
					where += " (project " + m.srv.Project + ")"
				}
				said = append(said, fmt.Sprintf("mcp-mux --profile %s%s in place of", name, where))
			}
			e.Remove = append(e.Remove, m.srv.Name)
			said[len(said)-1] += fmt.Sprintf(" %q", m.srv.Name)
			edits[m.srv.Project] = e
		}
		if len(edits) == 0 {
			continue
		}
		out, changes, err := clientimport.RewriteServers(f.File, f.data, edits)
		if err != nil {
			notes = append(notes, "left alone "+err.Error())
			continue
		}
		if !bytes.Equal(out, f.data) {
			plan = append(plan, plannedWrite{path: f.Path, old: f.data, new: out, what: strings.Join(said, "; "), changes: changes})
		}
	}

	// Claude Code's permission rules, carried over in the files they are
	// in, to the entry that runs each server.
	var cc []clientimport.ClaudeCodeServer
	var ccFiles []*clientimport.File
	for _, m := range all {
		if m.file.Client == clientimport.ClientClaudeCode {
			cc = append(cc, clientimport.ClaudeCodeServer{Name: m.srv.Name, Project: m.scope, Backend: m.backend, Mux: entries[scopeKey{m.file.Client, m.scope}]})
		}
	}
	for _, f := range files {
		ccFiles = append(ccFiles, f.File)
	}
	if len(cc) > 0 {
		for _, path := range clientimport.ClaudeCodeSettings(home, ccFiles, settingsDirs...) {
			data, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			var rules []clientimport.PermissionRule
			if err == nil {
				rules, err = clientimport.ReadPermissionRules(path, data)
			}
			var out []byte
			var added []clientimport.PermissionRule
			var changes []clientimport.Change
			if err == nil {
				carried := clientimport.CarryOver(rules, clientimport.SettingsProject(path, home), cc, muxServerName)
				out, added, changes, err = clientimport.AddPermissionRules(path, data, carried)
			}
			if err != nil {
				notes = append(notes, "left alone "+pathError(path, err))
				continue
			}
			if len(added) > 0 {
				var what []string
				for _, a := range added {
					what = append(what, a.List+" "+a.Rule)
				}
				plan = append(plan, plannedWrite{path: path, old: data, new: out, what: "permission rules added: " + strings.Join(what, ", "), changes: changes})
			}
		}
	}

	fmt.Fprintln(stderr, "\nmcp-mux import --apply:")
	for _, n := range notes {
		fmt.Fprintln(stderr, "  "+n)
	}
	if len(plan) == 0 {
		fmt.Fprintln(stderr, "  nothing to change: every file is as --apply would write it.")
		return nil
	}
	var done []undoFile
	stamp := time.Now().Format("20060102-150405")
	for i, w := range plan {
		u, err := applyWrite(w, stamp)
		if err != nil {
			fmt.Fprintf(stderr, "  left alone %s\n", err)
			if i == 0 && w.path == cfgPath {
				// The clients' entries would ask for profiles it lacks.
				return cli.Exit("mcp-mux import --apply: the config was not written, so no client was changed", 1)
			}
			continue
		}
		done = append(done, u)
		verb, saved := "changed   ", " (saved as "+u.Backup+")"
		if u.Backup == "" {
			verb, saved = "wrote     ", " (new; readable by you only)"
		}
		fmt.Fprintf(stderr, "  %s %s: %s%s\n", verb, w.path, w.what, saved)
	}
	if len(done) == 0 {
		return cli.Exit("mcp-mux import --apply: no file was changed", 1)
	}
	if err := recordApply(manifest, record, done); err != nil {
		return cli.Exit("mcp-mux import --apply: the files were changed, but what --undo needs was not saved: "+err.Error(), 1)
	}
	if !cfgExisted && len(res.Backends) > 0 {
		reportImport(stderr, res, cfgPath)
	}
	if len(res.Vars) > 0 {
		var passed, unset []string
		for _, v := range res.Vars {
			if slices.ContainsFunc(order, func(k scopeKey) bool { return entryEnv(all, k)[v] != "" }) {
				passed = append(passed, v)
			} else {
				unset = append(unset, v)
			}
		}
		if len(passed) > 0 {
			fmt.Fprintf(stderr, "\nThe config refers to %s: mcp-mux's entries pass them on from the clients, as the clients passed them to the servers (the \"env\" of each entry).\n", strings.Join(passed, ", "))
		}
		if len(unset) > 0 {
			fmt.Fprintf(stderr, "\nThe config refers to %s: set them in the environment the clients start mcp-mux in (or in the \"env\" of its entry).\n", strings.Join(unset, ", "))
		}
	}
	fmt.Fprintf(stderr, "\nRestart the clients to use mcp-mux. mcp-mux import --undo takes back what --apply changed in these files (and what any earlier --apply did).\n")
	return nil
}

// entryEnv is the "env" of mcp-mux's entry for k: each variable its
// servers had from the client (all, as moved), written as the client
// wrote it, so that the client gives mcp-mux what the backends need as it
// gave it to the servers; VS Code, given ${input:ID}, keeps asking the
// user for it. Claude Desktop expands no variable in its entries: it
// starts mcp-mux with its own environment, as it started the servers.
func entryEnv(all []moved, k scopeKey) map[string]string {
	if k.client == clientimport.ClientClaudeDesktop {
		return nil
	}
	withUser := k.project != "" && k.client != clientimport.ClientClaudeCode
	var env map[string]string
	for _, m := range all {
		if m.file.Client != k.client || (m.scope != k.project && !(withUser && m.scope == "")) {
			continue
		}
		for _, name := range m.srv.Vars {
			if ref := m.srv.VarRefs[name]; ref != "" && env[name] == "" {
				if env == nil {
					env = map[string]string{}
				}
				env[name] = ref
			}
		}
	}
	return env
}

// isSharedFile reports whether f is shared with others, so --apply must
// not write this machine's paths in it: a project's .mcp.json, which is
// checked in with the project and run by Claude Code on its other users'
// machines.
func isSharedFile(f *clientimport.File) bool {
	return f.Client == clientimport.ClientClaudeCode && f.Project != ""
}

// claudeCodeServerIn reports whether Claude Code runs a server named name
// in project after --apply: one of the user's or the project's (in
// ~/.claude.json or its .mcp.json) that does not move to mcp-mux.
func claudeCodeServerIn(files []*readFile, all []moved, project, name string) bool {
	for _, f := range files {
		if f.Client != clientimport.ClientClaudeCode {
			continue
		}
		for i := range f.Servers {
			s := &f.Servers[i]
			if s.Name != name || (clientimport.ScopeOf(f.File, s) != "" && clientimport.ScopeOf(f.File, s) != project) {
				continue
			}
			if !slices.ContainsFunc(all, func(m moved) bool {
				return m.file == f && m.srv.Name == s.Name && m.srv.Project == s.Project
			}) {
				return true
			}
		}
	}
	return false
}

// appendNew appends to list each of add it does not hold.
func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		if a != "" && !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}

// applyWrite writes w, unless its file changed since it was read; an
// existing file is first saved beside it (FILE.mcp-mux-backup-STAMP, with
// its mode) and then rewritten in place, which keeps its mode, owner and
// any link to it. A new file is created 0600, as a config may hold secrets.
func applyWrite(w plannedWrite, stamp string) (undoFile, error) {
	u := undoFile{Path: w.path, Written: digest(w.new), Changes: w.changes}
	now, err := os.ReadFile(w.path)
	switch {
	case w.old == nil && err == nil:
		return u, fmt.Errorf("%s: it was created since it was read", w.path)
	case w.old == nil && errors.Is(err, fs.ErrNotExist):
		return u, writeNewFile(w.path, w.new, false)
	case err != nil:
		return u, errors.New(pathError(w.path, err))
	case !bytes.Equal(now, w.old):
		return u, fmt.Errorf("%s: it changed since it was read (run --apply again)", w.path)
	}
	fi, err := os.Stat(w.path)
	if err != nil {
		return u, errors.New(pathError(w.path, err))
	}
	mode := fi.Mode().Perm()
	backup := w.path + ".mcp-mux-backup-" + stamp
	for n := 2; ; n++ {
		f, err := os.OpenFile(backup, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) {
			backup = fmt.Sprintf("%s.mcp-mux-backup-%s-%d", w.path, stamp, n)
			continue
		}
		if err != nil {
			return u, fmt.Errorf("%s: not saved, so not changed: %w", w.path, err)
		}
		_, err = f.Write(w.old)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && runtime.GOOS != "windows" {
			err = os.Chmod(backup, mode) // the umask may have taken bits away
		}
		if err != nil {
			os.Remove(backup)
			return u, fmt.Errorf("%s: not saved, so not changed: %w", w.path, err)
		}
		break
	}
	u.Backup = backup
	if err := os.WriteFile(w.path, w.new, mode); err != nil {
		return u, fmt.Errorf("%s: %w (its copy is %s)", w.path, err, backup)
	}
	return u, nil
}
