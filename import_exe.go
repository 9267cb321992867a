package main

// The mcp-mux that import, --apply and init write into the clients'
// entries: the path the user runs it by, and never a build that goes away.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// muxCommand is this mcp-mux as the user runs it, for the clients'
// entries. A link to it (as Homebrew installs it, to a versioned
// directory) stays the link, as an upgrade replaces what the link points
// at; run by a bare name, it is the file PATH finds. os.Executable alone
// gives the link's target on Linux. temporary says where it is when it
// is a build that goes away (see temporaryBuild), "" otherwise.
func muxCommand() (path, temporary string) {
	exe, err := os.Executable()
	if err != nil {
		return "mcp-mux", ""
	}
	path = exe
	if p := invokedAs(exe); p != "" {
		path = p
	}
	return path, temporaryBuild(exe)
}

// invokedAs is the absolute path this process was started by (os.Args[0],
// or the file PATH gives for a bare name) when it is the file exe, ""
// when it is not (a shell's own argv[0], a binary replaced since).
func invokedAs(exe string) string {
	if len(os.Args) == 0 || os.Args[0] == "" {
		return ""
	}
	arg0 := os.Args[0]
	var p string
	var err error
	if strings.ContainsAny(arg0, `/\`) {
		p, err = filepath.Abs(arg0)
	} else if p, err = exec.LookPath(arg0); err == nil {
		p, err = filepath.Abs(p)
	}
	if err != nil {
		return ""
	}
	a, err1 := os.Stat(p)
	b, err2 := os.Stat(exe)
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		return ""
	}
	return p
}

// temporaryBuild says where exe is when it is a build that goes away:
// `go run` leaves its binary in the Go build cache (GOCACHE, by default
// go-build in the user's cache directory), which `go clean -cache` and
// the cache's own trimming empty, or, before Go 1.24, in the temporary
// directory. "" when it is in neither.
func temporaryBuild(exe string) string {
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	cache := os.Getenv("GOCACHE")
	if cache == "" || cache == "off" {
		cache = ""
		if dir, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(dir, "go-build")
		}
	}
	dirs := []struct{ dir, what string }{
		{cache, "the Go build cache"},
		{os.Getenv("GOTMPDIR"), "the temporary directory"},
		{os.TempDir(), "the temporary directory"},
	}
	for _, d := range dirs {
		if d.dir != "" && within(exe, d.dir) {
			return fmt.Sprintf("%s (%s)", d.what, d.dir)
		}
	}
	return ""
}

// within reports whether path is under dir (both with links resolved).
func within(path, dir string) bool {
	if p, err := filepath.EvalSymlinks(dir); err == nil {
		dir = p
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// temporaryBuildAdvice is what to do instead of writing the build at exe,
// which is in where, into a client.
func temporaryBuildAdvice(exe, where string) string {
	return fmt.Sprintf("this mcp-mux, %s, is a temporary build (as `go run` makes) in %s: a client that runs it breaks when that is cleaned. Install mcp-mux (go install github.com/mcp-mux/mcp-mux@latest, or go install . in its source) and run the installed one", exe, where)
}
