package config

// Forgiving what people write in a backend's command, args and cwd, which
// they copy from shell snippets and READMEs: "~" and ${VAR} are expanded
// (as a shell would, but without one), a bare $NAME (which a shell would
// expand and mcp-mux does not) is a warning, and a whole command line in
// command ("npx -y pkg") gets the command/args split it should have been.
// These values are not secrets (env values are), so messages may show them.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// homeVar is the variable "~" stands for, as os.UserHomeDir reads it.
func homeVar() string {
	if runtime.GOOS == "windows" {
		return "USERPROFILE"
	}
	return "HOME"
}

// hasTilde reports whether v starts with "~" meaning the home directory:
// "~" alone or "~/..." ("~user" is not supported, and left alone).
func hasTilde(v string) bool {
	return v == "~" || strings.HasPrefix(v, "~/") || (filepath.Separator != '/' && strings.HasPrefix(v, "~"+string(filepath.Separator)))
}

// expandTilde replaces a leading "~" (see hasTilde) with the home
// directory. ok is false, and the problem reported, when it is needed and
// the home directory is unknown.
func (p *parser) expandTilde(k keyPath, v string) (string, bool) {
	if !hasTilde(v) {
		return v, true
	}
	home, _ := p.lookupEnv(homeVar())
	if home == "" {
		p.add(k, `cannot expand "~": %s is not set (write the path in full)`, homeVar())
		return v, false
	}
	return home + v[1:], true
}

// expandField expands one command, args entry or cwd: a leading "~",
// then ${VAR} and ${VAR:-default} as in env values. A bare $NAME is left
// as is and added to warns. For a disabled backend, unset variables and
// an unknown home are not problems (it is not started). ok is false when a
// problem was reported: the value is then not worth checking further.
func (p *parser) expandField(k keyPath, v string, disabled bool, warns *[]problem) (string, bool) {
	for _, name := range bareVars(v) {
		*warns = append(*warns, problem{path: k, line: p.lineOf(k),
			message: fmt.Sprintf(`"$%s" is not expanded (only "${...}" is): write ${%s}, or $$ for a literal "$"`, name, name)})
	}
	var home string
	if hasTilde(v) {
		if disabled {
			if h, _ := p.lookupEnv(homeVar()); h == "" {
				return v, true
			}
		}
		h, ok := p.expandTilde(k, "~")
		if !ok {
			return v, false
		}
		// The home directory is taken as is: a "$" in it is no variable.
		home, v = h, v[1:]
	}
	exp, issues := expandEnv(v, p.lookupEnv)
	ok := true
	for _, is := range issues {
		switch {
		case is.unset == "":
			p.add(k, "%s", is.malformed)
		case disabled:
			continue
		case LooksLikeSecretName(is.unset):
			p.add(k, "%s", unsetSecretMessage(is.unset, false))
		default:
			p.add(k, "${%s} is not set (use ${%s:-default} for a default)", is.unset, is.unset)
		}
		ok = false
	}
	return home + exp, ok
}

// warnBareEnvVar adds a warning for an env value with a bare $NAME in it,
// without the value or the name (both are part of a secret, maybe). Only
// conventional variable names (HOME, GITHUB_TOKEN) count: a password with
// "$" in it must not be nagged about.
func (p *parser) warnBareEnvVar(k keyPath, line int, v string, warns *[]problem) {
	for _, name := range bareVars(v) {
		if strings.ToUpper(name) == name {
			*warns = append(*warns, problem{path: k, line: line,
				message: `a "$" followed by a name is not expanded (only "${...}" is): write ${NAME}, or $$ for a literal "$" (the value is not shown, as it may be a secret)`})
			return
		}
	}
}

// bareVars returns the NAMEs of the $NAME in s that expandEnv leaves alone
// (a shell would have expanded them). $$ and ${...} are skipped as
// expandEnv reads them.
func bareVars(s string) []string {
	var names []string
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '$' {
			continue
		}
		switch c := s[i+1]; {
		case c == '$':
			i++
		case c == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return names
			}
			i += 2 + end
		case c == '_' || isLetter(c):
			j := i + 1
			for j < len(s) && (s[j] == '_' || isLetter(s[j]) || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			names = append(names, s[i+1:j])
			i = j - 1
		}
	}
	return names
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// shellHint explains a command that is a shell command line ("npx -y
// pkg"): no shell runs it, so it names a program that does not exist.
// raw is command as written, resolved where it was looked for, cwd the
// backend's (absolute) working directory, rawArgs its args as written.
// It returns "" when command is not that mistake.
func (p *parser) shellHint(raw, resolved, cwd string, rawArgs []string) string {
	if !strings.ContainsFunc(raw, isSpace) {
		return ""
	}
	if fileExists(resolved) {
		return "" // a real path with spaces in it
	}
	if !hasPathSeparator(resolved) {
		if _, err := p.lookPath(resolved); err == nil {
			return ""
		}
	}
	words := splitCommandLine(raw)
	if len(words) == 0 {
		return ""
	}
	if len(words) == 1 {
		return fmt.Sprintf("command %q has spaces around it: write command = %s", raw, tomlQuote(words[0]))
	}
	args := make([]string, 0, len(words)-1+len(rawArgs))
	for _, w := range append(words[1:], rawArgs...) {
		args = append(args, tomlQuote(w))
	}
	msg := fmt.Sprintf("command %q contains spaces, but no shell is used: write command = %s, args = [%s]",
		raw, tomlQuote(words[0]), strings.Join(args, ", "))
	if hasPathSeparator(words[0]) {
		if first, _ := p.resolveCommand(words[0], cwd); !fileExists(first) {
			msg += fmt.Sprintf(" (or, if it is one path with spaces in it: %q does not exist", raw)
			if resolved != raw {
				msg += fmt.Sprintf(", looked at %q", resolved)
			}
			msg += ")"
		}
	}
	return msg
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

// splitCommandLine splits a command line as a POSIX shell would for the
// simple cases people paste: words separated by blanks, '...' taken
// literally, "..." with \" and \\ escapes, \ before any other character
// outside quotes. Unbalanced quotes: split on blanks only. On Windows a
// backslash is a path's separator, escaping nothing but a quote.
func splitCommandLine(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isSpace(rune(c)):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return strings.Fields(s)
			}
			w.WriteString(s[i+1 : i+1+end])
			i += 1 + end
			inWord = true
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && (s[j+1] == '"' || (s[j+1] == '\\' && backslashEscapes)) {
					j++
				}
				w.WriteByte(s[j])
			}
			if j >= len(s) {
				return strings.Fields(s)
			}
			i = j
			inWord = true
		case c == '\\' && i+1 < len(s) && backslashEscapes:
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// backslashEscapes is whether a backslash in a command line escapes the
// next character (not on Windows, where it separates a path's names).
var backslashEscapes = runtime.GOOS != "windows"

// tomlQuote writes s as a TOML basic string.
func tomlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// render formats warnings as finish formats problems: sorted by line, with
// the backend's name in its key.
func (p *parser) render(warns []problem) []Problem {
	if len(warns) == 0 {
		return nil
	}
	problems := p.problems
	defer func() { p.problems = problems }()
	p.problems = warns
	return p.finish()
}
