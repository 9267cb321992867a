package mux

import (
	"encoding/json"
	"os"

	"github.com/mcp-mux/mcp-mux/mux/catalogmem"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// What a backend is remembered under in the catalog memory (lazy.go).

// identityOf is what makes a backend, for the catalog memory: what runs it
// and where, never how mux exposes it. A local backend with no cwd runs in
// dir, where mcp-mux was started (the agent's project); "" leaves the
// directory out.
func identityOf(s config.Backend, dir string) catalogmem.Identity {
	cwd := s.Cwd
	if cwd == "" && s.URL == "" {
		cwd = dir
	}
	return catalogmem.Identity{Name: s.Name, Command: s.Command, Args: s.Args, URL: s.URL, Cwd: cwd,
		Protocol: s.Protocol, Transport: s.Transport, InheritEnv: s.InheritEnv, Env: s.Env, Headers: s.Headers}
}

// memoryIDs are what s is remembered under, the first that holds it
// found: a local backend with no cwd lists something else in another
// project if it reads the project, so each directory remembers its own;
// in a directory it was never seen in, what it listed in any other is
// listed until its first use there says what it lists (list_changed if that
// differs), as the memory did before it knew directories.
func memoryIDs(s config.Backend, dir string) []catalogmem.Identity {
	own := identityOf(s, dir)
	if own.Cwd == s.Cwd {
		return []catalogmem.Identity{own}
	}
	return []catalogmem.Identity{own, identityOf(s, "")}
}

// runDir is where a local backend with no cwd runs: the session's
// directory (WithEnviron), or mcp-mux's own.
func (m *Mux) runDir() string {
	if m.cwd != "" {
		return m.cwd
	}
	dir, _ := os.Getwd()
	return dir
}

// recall is the first of ids the memory holds (for caps, unless nil).
func recall(store *catalogmem.Store, ids []catalogmem.Identity, caps json.RawMessage) (catalogmem.Entry, bool) {
	for _, id := range ids {
		var e catalogmem.Entry
		var ok bool
		if caps != nil {
			e, ok = store.LookupFor(id, caps)
		} else {
			e, ok = store.Lookup(id)
		}
		if ok {
			return e, true
		}
	}
	return catalogmem.Entry{}, false
}
