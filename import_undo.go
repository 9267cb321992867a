package main

// `mcp-mux import --undo`: take back what each --apply changed, newest
// first. In a client's JSON file only what --apply changed is taken back
// (clientimport.Undo), as the clients rewrite their files and users edit
// them; mcp-mux's config is put back whole, and never while a client's
// entry still runs mcp-mux with it and would lose what it runs.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcp-mux/mcp-mux/mux/clientimport"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// undoManifest is what each --apply changed, oldest first, for --undo.
type undoManifest struct {
	Applies []undoApply `json:"applies"`
	// An older mcp-mux recorded its one --apply so, without Applies.
	Applied string     `json:"applied,omitempty"`
	Files   []undoFile `json:"files,omitempty"`
}

// undoApply is what one --apply changed, in the order it wrote the files.
type undoApply struct {
	Applied string     `json:"applied"`
	Files   []undoFile `json:"files"`
}

type undoFile struct {
	Path    string `json:"path"`
	Backup  string `json:"backup,omitempty"` // "": --apply created the file
	Written string `json:"written_sha256"`   // what --apply wrote in it
	// Changes are what --apply changed in a client's JSON file, taken
	// back one by one. Without them (mcp-mux's config) the file is put
	// back whole, if it is still what --apply wrote.
	Changes []clientimport.Change `json:"changes,omitempty"`
}

// undoManifestPath is where --apply records what it changed: beside the
// user's config file, wherever the config went.
func undoManifestPath() (string, error) {
	p := config.UserPath(os.Getenv)
	if p == "" {
		return "", errors.New("neither XDG_CONFIG_HOME nor HOME is set, so there is nowhere to record what --apply changes")
	}
	return filepath.Join(filepath.Dir(p), "import-undo.json"), nil
}

// readManifest reads the record at path: an empty one if there is none.
func readManifest(path string) (*undoManifest, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &undoManifest{}, nil
	}
	var m undoManifest
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		return nil, errors.New(pathError(path, err))
	}
	if len(m.Files) > 0 {
		m.Applies = append([]undoApply{{Applied: m.Applied, Files: m.Files}}, m.Applies...)
		m.Applied, m.Files = "", nil
	}
	return &m, nil
}

// writeManifest writes m to path, or removes path when m records nothing.
func writeManifest(path string, m *undoManifest) error {
	if len(m.Applies) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o600)
}

// recordApply adds what an --apply changed (files, in the order written)
// to the record at path.
func recordApply(path string, m *undoManifest, files []undoFile) error {
	m.Applies = append(m.Applies, undoApply{Applied: time.Now().Format(time.RFC3339), Files: files})
	return writeManifest(path, m)
}

// importUndo takes back what each recorded --apply changed, newest first,
// saying what it did to each file on w; what it must leave alone stays
// recorded, for an --undo once the user has seen to it. A file's copy
// from before --apply is removed once nothing of that --apply is left to
// take back in it.
func importUndo(w io.Writer) error {
	path, err := undoManifestPath()
	if err != nil {
		return cli.Exit("mcp-mux import --undo: "+err.Error(), 1)
	}
	m, err := readManifest(path)
	if err != nil {
		return cli.Exit("mcp-mux import --undo: "+err.Error(), 1)
	}
	if len(m.Applies) == 0 {
		return cli.Exit("mcp-mux import --undo: nothing to undo: no import --apply is recorded in "+path, 1)
	}
	u := &undoer{w: w, m: m}
	var kept []undoApply
	for _, a := range slices.Backward(m.Applies) {
		var left []undoFile
		// The reverse of the order written: the clients, then the config.
		for _, f := range slices.Backward(a.Files) {
			if rest := u.undo(f); rest != nil {
				left = append(left, *rest)
			}
		}
		if len(left) > 0 {
			slices.Reverse(left)
			kept = append(kept, undoApply{Applied: a.Applied, Files: left})
		}
	}
	slices.Reverse(kept)
	m.Applies = kept
	if err := writeManifest(path, m); err != nil {
		return cli.Exit("mcp-mux import --undo: "+pathError(path, err), 1)
	}
	if len(kept) > 0 {
		return cli.Exit("mcp-mux import --undo: some of what --apply changed was left alone (above), and is still recorded: run --undo again once you have seen to it", 1)
	}
	return nil
}

// undoer takes back the files of the record m, one at a time.
type undoer struct {
	w    io.Writer
	m    *undoManifest
	left []undoFile // the changes left alone so far, newest --apply first
}

// undo takes back f, and returns what is left of it to take back (nil:
// nothing).
func (u *undoer) undo(f undoFile) *undoFile {
	if f.Changes == nil {
		if err := u.undoWhole(f); err != nil {
			fmt.Fprintf(u.w, "  left alone %s\n", err)
			return &f
		}
		return nil
	}
	now, err := os.ReadFile(f.Path)
	if err != nil {
		fmt.Fprintf(u.w, "  left alone %s; its copy from before --apply is %s\n", pathError(f.Path, err), f.Backup)
		u.left = append(u.left, f)
		return &f
	}
	data := now
	var left []clientimport.Change
	var why []string
	for _, c := range slices.Backward(f.Changes) {
		out, err := clientimport.Undo(f.Path, data, c)
		if err != nil {
			left = append(left, c)
			why = append(why, strings.TrimPrefix(err.Error(), f.Path+": "))
			continue
		}
		data = out
	}
	if !bytes.Equal(data, now) {
		if err := writeBack(f.Path, now, data); err != nil {
			fmt.Fprintf(u.w, "  left alone %s; its copy from before --apply is %s\n", err, f.Backup)
			u.left = append(u.left, f)
			return &f
		}
	}
	if len(left) > 0 {
		rest := ""
		if len(left) < len(f.Changes) {
			rest = " (the rest of what --apply changed in it is taken back)"
		}
		fmt.Fprintf(u.w, "  left alone %s: %s%s. Undo that edit and run --undo again, or take what you need from its copy from before --apply, %s\n", f.Path, strings.Join(why, "; "), rest, f.Backup)
		slices.Reverse(left)
		f.Changes = left
		u.left = append(u.left, f)
		return &f
	}
	fmt.Fprintf(u.w, "  restored   %s\n", f.Path)
	removeBackup(u.w, f.Backup)
	return nil
}

// writeBack writes data over the file at path in place (its mode, owner
// and links kept), unless it changed from was meanwhile.
func writeBack(path string, was, data []byte) error {
	if again, err := os.ReadFile(path); err != nil || !bytes.Equal(again, was) {
		return fmt.Errorf("%s: it changed while --undo read it", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return errors.New(pathError(path, err))
	}
	if err := os.WriteFile(path, data, fi.Mode().Perm()); err != nil {
		return errors.New(pathError(path, err))
	}
	return nil
}

func removeBackup(w io.Writer, backup string) {
	if backup == "" {
		return
	}
	if err := os.Remove(backup); err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(w, "  not removed %s\n", pathError(backup, err))
	}
}

// undoWhole puts back f whole (mcp-mux's config): its copy, or no file if
// --apply created it; only if it still holds what --apply wrote, and no
// client's entry still runs mcp-mux with it and would lose what it runs.
func (u *undoer) undoWhole(f undoFile) error {
	now, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) && f.Backup == "" {
		fmt.Fprintf(u.w, "  removed    %s already\n", f.Path)
		return nil
	}
	if err != nil {
		return errors.New(pathError(f.Path, err))
	}
	if digest(now) != f.Written {
		if f.Backup == "" {
			return fmt.Errorf("%s: it changed since import --apply created it", f.Path)
		}
		return fmt.Errorf("%s: it changed since import --apply wrote it; its earlier copy is %s", f.Path, f.Backup)
	}
	var old []byte
	if f.Backup != "" {
		if old, err = os.ReadFile(f.Backup); err != nil {
			return errors.New(pathError(f.Backup, err))
		}
	}
	if p := u.stillRun(f.Path, now, old); p != "" {
		return fmt.Errorf("%s: %s still runs mcp-mux with it, and would lose what it runs: the config stays as it is while that entry is there", f.Path, p)
	}
	if f.Backup == "" {
		if err := os.Remove(f.Path); err != nil {
			return errors.New(pathError(f.Path, err))
		}
		fmt.Fprintf(u.w, "  removed    %s (import --apply created it)\n", f.Path)
		return nil
	}
	fi, err := os.Stat(f.Backup)
	if err != nil {
		return errors.New(pathError(f.Backup, err))
	}
	if err := os.WriteFile(f.Path, old, fi.Mode().Perm()); err != nil {
		return errors.New(pathError(f.Path, err))
	}
	if runtime.GOOS != "windows" {
		os.Chmod(f.Path, fi.Mode().Perm())
	}
	fmt.Fprintf(u.w, "  restored   %s\n", f.Path)
	removeBackup(u.w, f.Backup)
	return nil
}

// stillRun names an entry of a client that runs mcp-mux with the config
// at path and that putting old in its place (nil: removing it) would
// leave worse off; "" when there is none. An entry an --apply wrote is
// taken back with the config it wrote, newest first, unless it was left
// alone (u.left, this --apply's and newer ones'). Any other, in the
// clients' files (those recorded, and where import looks), must get the
// same backends from old: the same profile, or for the whole config the
// same backends.
func (u *undoer) stillRun(path string, now, old []byte) string {
	cur, err := clientimport.ReadExisting(path, now)
	if err != nil {
		cur = nil
	}
	var prev *clientimport.Existing
	if old != nil {
		if prev, err = clientimport.ReadExisting(path, old); err != nil {
			prev = nil
		}
	}
	home, _ := os.UserHomeDir()
	for _, file := range u.clientFiles(path) {
		var f *clientimport.File
		data, err := os.ReadFile(file)
		if err == nil {
			f, err = clientimport.Read(file, data, clientimport.Options{Home: home})
		}
		if err != nil {
			// Unread, an entry left alone in it counts as there.
			if name, profile, ok := u.leftAlone(file, "", path); ok {
				return entryName(name, file, "", profile)
			}
			continue
		}
		for _, s := range f.Servers {
			profile, ok := runsWith(s.Args, path)
			if !ok {
				continue
			}
			if _, _, left := u.leftAlone(file, s.Name, path); !left && (u.applied(file, s.Name, path) || prev != nil && cur != nil && sameView(cur, prev, profile)) {
				continue
			}
			return entryName(s.Name, file, s.Project, profile)
		}
	}
	return ""
}

// leftAlone reports whether an entry an --apply wrote in file, running
// mcp-mux with the config at cfg, named name ("": any), was left alone by
// this --undo; with its name and profile.
func (u *undoer) leftAlone(file, name, cfg string) (string, string, bool) {
	for _, f := range u.left {
		if f.Path != file {
			continue
		}
		for _, c := range f.Changes {
			for _, a := range c.Added {
				if n, p, ok := addedRunsWith(a, cfg); ok && (name == "" || n == name) {
					return n, p, true
				}
			}
		}
	}
	return "", "", false
}

func entryName(name, file, project, profile string) string {
	where := ""
	if project != "" {
		where = " (project " + project + ")"
	}
	if profile != "" {
		where += " --profile " + profile
	}
	return fmt.Sprintf("the entry %q in %s%s", name, file, where)
}

// applied reports whether a recorded --apply wrote the entry name in file,
// running mcp-mux with the config at cfg.
func (u *undoer) applied(file, name, cfg string) bool {
	for _, a := range u.m.Applies {
		for _, f := range a.Files {
			if f.Path != file {
				continue
			}
			for _, c := range f.Changes {
				for _, m := range c.Added {
					if n, _, ok := addedRunsWith(m, cfg); ok && n == name {
						return true
					}
				}
			}
		}
	}
	return false
}

// addedRunsWith reports whether member, an entry --apply wrote ("name":
// {"command": ..., "args": [...]}), runs mcp-mux with the config at cfg;
// with its name and profile.
func addedRunsWith(member, cfg string) (name, profile string, ok bool) {
	var entry map[string]struct{ Args []string }
	if json.Unmarshal([]byte("{"+member+"}"), &entry) != nil {
		return "", "", false
	}
	for n, e := range entry {
		if p, runs := runsWith(e.Args, cfg); runs {
			return n, p, true
		}
	}
	return "", "", false
}

// clientFiles are the files whose entries may run mcp-mux with the config
// at cfg: those the record names, and where import looks for the clients'.
func (u *undoer) clientFiles(cfg string) []string {
	var out []string
	add := func(p string) {
		if p != cfg && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, a := range u.m.Applies {
		for _, f := range a.Files {
			add(f.Path)
		}
	}
	wd, _ := os.Getwd()
	for _, loc := range clientimport.Locations(runtime.GOOS, os.Getenv, wd) {
		add(loc.Path)
	}
	return out
}

// runsWith reports whether an entry with args runs mcp-mux with the
// config at cfg (-c or --config), and the profile it asks for ("" for
// none).
func runsWith(args []string, cfg string) (profile string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func(flags ...string) (string, bool) {
			for _, fl := range flags {
				if a == fl && i+1 < len(args) {
					i++
					return args[i], true
				}
				if v, found := strings.CutPrefix(a, fl+"="); found {
					return v, true
				}
			}
			return "", false
		}
		if v, found := value("-c", "--config", "-config"); found {
			ok = ok || filepath.Clean(v) == filepath.Clean(cfg)
		} else if v, found := value("--profile", "-profile"); found {
			profile = v
		}
	}
	return profile, ok
}

// sameView reports whether an entry asking for profile ("" for none: the
// whole config) gets the same backends from the configs a and b.
func sameView(a, b *clientimport.Existing, profile string) bool {
	if profile == "" {
		return slices.Equal(a.Names, b.Names)
	}
	pa, pb := a.Profiles[profile], b.Profiles[profile]
	return pa != nil && pb != nil && reflect.DeepEqual(pa.Backends, pb.Backends)
}
