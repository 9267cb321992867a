package clientimport

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestIsMuxEntryKnowsTheRunningMcpMuxByItsPath: an entry launches mcp-mux
// when its command is the running binary, whatever it is named (by its
// path, through a link, or as a bare name found on PATH), or is a program
// named mcp-mux; another program, or a remote server, does not.
func TestIsMuxEntryKnowsTheRunningMcpMuxByItsPath(t *testing.T) {
	dir := t.TempDir()
	ext := ""
	if runtime.GOOS == "windows" {
		ext = ".exe"
	}
	exe := filepath.Join(dir, "mm"+ext)
	other := filepath.Join(dir, "other"+ext)
	for _, p := range []string{exe, other} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
	cases := map[string]struct {
		srv  Server
		want bool
	}{
		"its path":        {Server{Command: exe}, true},
		"a bare name":     {Server{Command: "mm"}, true},
		"named mcp-mux":   {Server{Command: "/opt/bin/mcp-mux"}, true},
		"mcp-mux.exe":     {Server{Command: `C:\Tools\MCP-MUX.EXE`}, true},
		"another program": {Server{Command: other}, false},
		"not found":       {Server{Command: "nowhere"}, false},
		"remote":          {Server{URL: "http://127.0.0.1:9/mcp"}, false},
	}
	if runtime.GOOS != "windows" {
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(exe, link); err != nil {
			t.Fatal(err)
		}
		cases["a link to it"] = struct {
			srv  Server
			want bool
		}{Server{Command: link}, true}
	}
	for name, c := range cases {
		if got := IsMuxEntry(&c.srv, exe); got != c.want {
			t.Errorf("%s (%s): %v, want %v", name, c.srv.Command, got, c.want)
		}
	}
}

// TestEntryForNamesAClaudeCodeProjectsEntryApart: in Claude Code a
// project's entry is named after the project, apart from the user's and
// from the project's other servers; elsewhere it is mcp-mux's one name.
func TestEntryForNamesAClaudeCodeProjectsEntryApart(t *testing.T) {
	none := func(string) bool { return false }
	taken := func(n string) bool { return n == "mcp-mux-my-app" || n == "mcp-mux-my-app-2" }
	for _, c := range []struct {
		client, project string
		taken           func(string) bool
		want            string
	}{
		{ClientClaudeCode, "", none, "mcp-mux"},
		{ClientClaudeCode, "/home/u/src/my app", none, "mcp-mux-my-app"},
		{ClientClaudeCode, "/home/u/src/my app", taken, "mcp-mux-my-app-3"},
		{ClientClaudeCode, "/", none, "mcp-mux-project"},
		{ClientCursor, "/home/u/src/my app", none, "mcp-mux"},
		{ClientVSCode, "/home/u/src/my app", none, "mcp-mux"},
	} {
		if got := EntryFor(c.client, c.project, "mcp-mux", c.taken); got != c.want {
			t.Errorf("%s, %q: %q, want %q", c.client, c.project, got, c.want)
		}
	}
}
