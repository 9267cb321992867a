package backends

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// CommandPath is the program spec's child runs: Command itself when it is
// a path, else the file it names on the PATH of environ (mux's own when
// nil), as exec.LookPath finds it on mux's. A shared mcp-mux starts a
// session's backend from what the session's PATH names, not its own; the
// result also tells two sessions' backends apart where their PATHs differ
// but ChildEnv does not (an env table that sets PATH).
func CommandPath(spec Spec, environ []string) (string, error) {
	if environ == nil || !isBareName(spec.Command) {
		return exec.LookPath(spec.Command)
	}
	return lookPathIn(spec.Command, envValue(environ, "PATH"), envValue(environ, "PATHEXT"))
}

// isBareName reports whether command is a name to look up on PATH rather
// than a path, as exec.Command decides.
func isBareName(command string) bool { return filepath.Base(command) == command }

// lookPathIn is exec.LookPath on the PATH given: the first directory
// holding an executable called file (on Windows, file with one of
// pathext's extensions, as Windows runs it). A directory that is not
// absolute is refused, as exec.LookPath refuses it (exec.ErrDot): it would
// depend on the directory the child runs in.
func lookPathIn(file, path, pathext string) (string, error) {
	names := []string{file}
	if runtime.GOOS == "windows" {
		names = windowsNames(file, pathext)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "." // a Unix PATH's empty entry is the current directory
		}
		for _, name := range names {
			p := filepath.Join(dir, name)
			if !isExecutable(p) {
				continue
			}
			if !filepath.IsAbs(p) {
				return p, &exec.Error{Name: file, Err: exec.ErrDot}
			}
			return p, nil
		}
	}
	return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
}

// windowsNames are the files Windows may run for file: file itself when
// its extension is one of pathext's, then file with each of them.
func windowsNames(file, pathext string) []string {
	exts := []string{".com", ".exe", ".bat", ".cmd"}
	if pathext != "" {
		exts = nil
		for _, e := range strings.Split(strings.ToLower(pathext), ";") {
			if e != "" && e[0] == '.' {
				exts = append(exts, e)
			}
		}
	}
	var names []string
	if ext := strings.ToLower(filepath.Ext(file)); ext != "" {
		for _, e := range exts {
			if ext == e {
				names = append(names, file)
				break
			}
		}
	}
	for _, e := range exts {
		names = append(names, file+e)
	}
	return names
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() {
		return false
	}
	return runtime.GOOS == "windows" || fi.Mode().Perm()&0o111 != 0
}

// envValue is name's value in environ: the last entry of that name, as
// ChildEnv keeps it.
func envValue(environ []string, name string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && envKey(k) == envKey(name) {
			v = val
		}
	}
	return v
}
