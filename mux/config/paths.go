package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Paths in the config file.
//
// An agent starts mcp-mux in a directory of its own choosing (often / or
// its install directory), so a path relative to the working directory would
// mean something different under each agent. Every relative path in the
// file is therefore relative to the directory of the file itself: log_file,
// audit_log, cwd, and a command that contains a path separator (relative to cwd when
// cwd is set, as the child would see it; cwd itself starts at the config
// file's directory). They are made absolute when the file is loaded, after
// a leading "~" is expanded (forgive.go).

// absDirOf is the absolute directory of the config file at path.
func absDirOf(path string) string {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return filepath.Dir(path)
	}
	return dir
}

// resolvePath returns path made absolute against the config file's
// directory, and a note for messages that says so ("" when path was
// absolute or empty).
func (p *parser) resolvePath(path string) (string, string) {
	if path == "" || filepath.IsAbs(path) {
		return path, ""
	}
	if rooted(path) {
		return underDir(p.dir, path), "" // on the config file's drive
	}
	return underDir(p.dir, path), fmt.Sprintf(" (relative to the config file's directory %s)", p.dir)
}

// swallowedBackslash explains a path with a control character in it: in
// a "double-quoted" TOML string a backslash starts an escape, so
// "C:\tools\bin" is C:, a tab, "ools", a backspace and "in". It returns
// "" for a value without one, or that does not look like a path (a tab
// between the words of a command line is another mistake).
func swallowedBackslash(v string) string {
	i := strings.IndexAny(v, "\t\n\r\b\f")
	if i < 0 {
		return ""
	}
	drive := len(v) >= 2 && v[1] == ':' && isLetter(v[0])
	if !drive && !strings.Contains(v, `\`) && (i == 0 || !strings.ContainsRune(`:/`, rune(v[i-1]))) {
		return ""
	}
	meant := strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`, "\b", `\b`, "\f", `\f`).Replace(v)
	return fmt.Sprintf(`%q has a control character in it: in a "double-quoted" TOML string a backslash starts an escape (\t is a tab, \n a line break, \b a backspace); write a Windows path in single quotes, '%s', or with each backslash doubled`, v, meant)
}

// rooted reports whether path, not absolute, starts at a root: on
// Windows, \logs or /logs, on the current drive, which for the config
// file's paths is its own.
func rooted(path string) bool {
	return path != "" && os.IsPathSeparator(path[0]) && filepath.VolumeName(path) == ""
}

// dirAsWritten is the directory part of path with the separators it was
// written with (filepath.Dir turns / into \ on Windows).
func dirAsWritten(path string) string {
	if i := strings.LastIndexAny(path, "/"+string(filepath.Separator)); i > 0 {
		return path[:i]
	}
	return filepath.Dir(path)
}

func hasPathSeparator(command string) bool {
	return strings.ContainsRune(command, '/') || strings.ContainsRune(command, filepath.Separator)
}

// resolveCommand returns command made absolute if it is a relative path
// (a bare name is looked up on PATH and left alone), and what it was taken
// relative to: cwd (already absolute) when set, else the config file's
// directory.
func (p *parser) resolveCommand(command, cwd string) (string, string) {
	if !hasPathSeparator(command) || filepath.IsAbs(command) {
		return command, ""
	}
	if rooted(command) {
		return underDir(p.dir, command), "" // on the config file's drive
	}
	if cwd != "" {
		return underDir(cwd, command), "cwd " + cwd
	}
	return underDir(p.dir, command), "the config file's directory " + p.dir
}

// checkLogFile resolves s.LogFile and reports a log file that cannot be
// opened or is stdout, which carries the protocol.
func (p *parser) checkLogFile(k keyPath, s *Settings) {
	p.checkOutputFile(k, &s.LogFile, "logs there would corrupt it (remove log_file to log to stderr)")
}

// checkOutputFile resolves *file, a file mcp-mux writes, and reports one
// that cannot be opened or is stdout, which carries the protocol (why
// says what writing there would do, and the fix).
func (p *parser) checkOutputFile(k keyPath, file *string, why string) {
	given := *file
	if msg := swallowedBackslash(given); msg != "" {
		p.add(k, "%s", msg)
		return
	}
	expanded, ok := p.expandTilde(k, given)
	if !ok {
		return
	}
	path, note := p.resolvePath(expanded)
	*file = path
	if IsStdoutName(path) {
		p.add(k, "%q%s is mcp-mux's stdout, which carries the MCP protocol: %s", given, note, why)
		return
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		p.add(k, "%q%s is a directory, expected a file name", given, note)
	} else if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		p.add(k, "directory %q%s does not exist", dirAsWritten(given), note)
	}
}

// stdoutProcRe matches the /proc names of this process's fd 1.
var stdoutProcRe = regexp.MustCompile(`^/proc/(?:self|thread-self|` + strconv.Itoa(os.Getpid()) + `)(?:/task/[0-9]+)?/fd/1$`)

// IsStdoutName reports whether path names the standard output of whoever
// opens it: /dev/stdout, /dev/fd/1, /proc/self/fd/1, or a symlink (or a
// path through symlinked directories) leading to one of those. It looks
// at names only; the file stdout happens to be redirected to is found by
// comparing files when mux starts.
func IsStdoutName(path string) bool {
	for hops := 0; hops < 40; hops++ {
		path = filepath.Clean(path)
		if isStdoutAlias(path) {
			return true
		}
		// /dev/fd is itself a symlink (to /proc/self/fd), as may be any
		// directory on the way.
		if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
			path = filepath.Join(dir, filepath.Base(path))
			if isStdoutAlias(path) {
				return true
			}
		}
		target, err := os.Readlink(path)
		if err != nil {
			return false
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	return false
}

func isStdoutAlias(path string) bool {
	return path == "/dev/stdout" || path == "/dev/fd/1" || stdoutProcRe.MatchString(path)
}
