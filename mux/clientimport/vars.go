package clientimport

// The clients' variables, command lines and env files, in mcp-mux's terms
// (see import.go).

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// vars rewrites the variable references of in (a value of where: command,
// args, env, ...) into mcp-mux's ${NAME}, resolves the ones that only the
// client knows, and escapes every other "$" that mcp-mux would expand. A
// reference it cannot translate makes s unusable, and in is kept as is
// (it is only written commented out).
func (c *converter) vars(s *Server, in, where string) string {
	type seg struct {
		text string
		ref  bool
	}
	var segs []seg
	addLit := func(t string) {
		if n := len(segs); n > 0 && !segs[n-1].ref {
			segs[n-1].text += t
		} else {
			segs = append(segs, seg{text: t})
		}
	}
	for i := 0; i < len(in); {
		if in[i] == '$' && i+1 < len(in) && in[i+1] == '{' {
			if end := strings.IndexByte(in[i+2:], '}'); end >= 0 {
				body := in[i+2 : i+2+end]
				v := c.variable(s, body)
				if v.problem != "" {
					if s.Unusable == "" {
						s.Unusable = fmt.Sprintf("its %s uses %s", where, v.problem)
					}
					return in
				}
				if v.ref != "" {
					segs = append(segs, seg{text: "${" + v.ref + "}", ref: true})
					// One with a default need not be set.
					if !strings.Contains(v.ref, ":-") && !slices.Contains(s.Vars, v.name) {
						s.Vars = append(s.Vars, v.name)
						if s.VarRefs == nil {
							s.VarRefs = map[string]string{}
						}
						s.VarRefs[v.name] = in[i : i+2+end+1]
					}
				} else {
					addLit(v.literal)
				}
				i += 2 + end + 1
				continue
			}
		}
		addLit(in[i : i+1])
		i++
	}
	var b strings.Builder
	for i, sg := range segs {
		if sg.ref {
			b.WriteString(sg.text)
		} else {
			b.WriteString(escapeDollars(sg.text, i+1 < len(segs)))
		}
	}
	return b.String()
}

// escapeDollars writes literal text so that mcp-mux's expansion gives it
// back: a "$" before "$" or "{" (or before a ${NAME} that follows, when
// beforeRef) is doubled; any other "$" is kept as it is.
func escapeDollars(t string, beforeRef bool) string {
	if !strings.Contains(t, "$") {
		return t
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		b.WriteByte(t[i])
		if t[i] != '$' {
			continue
		}
		next := byte(0)
		if i+1 < len(t) {
			next = t[i+1]
		} else if beforeRef {
			next = '{'
		}
		if next == '$' || next == '{' {
			b.WriteByte('$')
		}
	}
	return b.String()
}

// variable is one ${...} of a client's file translated: a reference to an
// environment variable (ref, the text inside mcp-mux's ${...}, and name),
// a literal it stands for, or the problem that it cannot be translated.
type variable struct {
	ref, name, literal, problem string
}

func (c *converter) variable(s *Server, body string) variable {
	switch {
	case strings.HasPrefix(body, "env:"):
		if name := body[len("env:"):]; config.IsEnvVarName(name) {
			return variable{ref: name, name: name}
		}
		return variable{problem: "a ${env:...} whose name is not a variable name"}
	case body == "userHome":
		if c.home == "" {
			return variable{problem: "${userHome}, and the home directory is not known"}
		}
		return variable{literal: c.home}
	case body == "workspaceFolder" || body == "workspaceFolderBasename":
		if c.project == "" {
			return variable{problem: "${" + body + "}, which only a workspace defines (this file is not in one)"}
		}
		if body == "workspaceFolder" {
			return variable{literal: c.project}
		}
		return variable{literal: filepath.Base(c.project)}
	case body == "pathSeparator" || body == "/":
		return variable{literal: string(filepath.Separator)}
	case strings.HasPrefix(body, "input:"):
		id := body[len("input:"):]
		in := c.inputs[id]
		name := inputVarName(id)
		ref, also := name, ""
		// The value VS Code offers becomes mcp-mux's default, used when
		// the variable is not set; a password's stays out of the file, and
		// a "}" would end the ${...}.
		switch {
		case !in.HasDefault || in.Default == "":
		case in.Password:
			also = "; its default is not copied, as it is a password"
		case strings.Contains(in.Default, "}"):
			also = fmt.Sprintf("; its default %s cannot be a default of mcp-mux's ${...}, which ends at the first \"}\"", tomlString(in.Default))
		default:
			ref = name + ":-" + in.Default
			also = ", or takes the default that VS Code offers when it is not set"
		}
		what := "${input:" + id + "}"
		if in.Description != "" {
			what += " (" + in.Description + ")"
		}
		note := fmt.Sprintf("%s became ${%s}: VS Code asks the user for it; mcp-mux reads it from its own environment%s", what, ref, also)
		if !slices.Contains(s.Notes, note) {
			s.Notes = append(s.Notes, note)
		}
		return variable{ref: ref, name: name}
	}
	// ${NAME} and ${NAME:-default}: Claude Code's syntax is mcp-mux's.
	if name, _, _ := strings.Cut(body, ":-"); config.IsEnvVarName(name) {
		return variable{ref: body, name: name}
	}
	if i := strings.IndexByte(body, ':'); i > 0 && config.IsEnvVarName(body[:i]) {
		return variable{problem: fmt.Sprintf("${%s:...}, which mcp-mux cannot resolve", body[:i])}
	}
	return variable{problem: "a ${...} that mcp-mux cannot resolve"}
}

// inputVarName is the environment variable that stands for VS Code's
// ${input:id}: "github-token" → GITHUB_TOKEN.
func inputVarName(id string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(id) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		name = "INPUT_" + name
	}
	return name
}

// resolve gives the path a client would use for in now (for envFile):
// its variables from this process's environment; ok is false if one
// cannot be resolved.
func (c *converter) resolve(s *Server, in string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(in); {
		if in[i] == '$' && i+1 < len(in) && in[i+1] == '{' {
			if end := strings.IndexByte(in[i+2:], '}'); end >= 0 {
				scratch := *s
				v := c.variable(&scratch, in[i+2:i+2+end])
				switch {
				case v.problem != "":
					return "", false
				case v.ref != "":
					val, ok := os.LookupEnv(v.name)
					if !ok {
						_, def, hasDef := strings.Cut(v.ref, ":-")
						if !hasDef {
							return "", false
						}
						val = def
					}
					b.WriteString(val)
				default:
					b.WriteString(v.literal)
				}
				i += 2 + end + 1
				continue
			}
		}
		b.WriteByte(in[i])
		i++
	}
	return b.String(), true
}

var (
	// shellSyntaxRe finds what only a shell would make sense of: pipes,
	// lists, redirections, command substitution.
	shellSyntaxRe = regexp.MustCompile("[|&;<>`\n]|\\$\\(")
	// notPlainRe finds what makes splitting on spaces a guess: quotes,
	// backslashes (escapes, but on Windows path separators), globs,
	// parentheses ("Program Files (x86)"), a $NAME.
	notPlainRe  = regexp.MustCompile(map[bool]string{true: `["'*?()$]`, false: `["'\\*?()$]`}[runtime.GOOS == "windows"])
	clientVarRe = regexp.MustCompile(`\$\{[^}]*\}`)
)

// splitCommand splits a command written as a command line ("npx -y pkg",
// with no args) into command and args when that is unambiguous: no quotes,
// no backslashes, no shell syntax, and a first word that is a program
// name or an existing file. A shell command line makes s unusable: mcp-mux
// never starts a shell.
func (c *converter) splitCommand(s *Server, command string) (string, []string) {
	fields := strings.Fields(command)
	if len(fields) < 2 || isFile(command) {
		return command, nil
	}
	plain := clientVarRe.ReplaceAllString(command, "x")
	if shellSyntaxRe.MatchString(plain) {
		s.Unusable = "its command is a shell command line, and mcp-mux runs programs directly, never through a shell: write it as command and args, or put it in a script"
		return command, nil
	}
	first := fields[0]
	if notPlainRe.MatchString(plain) || (strings.ContainsAny(first, `/\`) && !strings.Contains(first, "${") && !isFile(first)) {
		s.Notes = append(s.Notes, "its command has spaces: it is run as one program path, not split into arguments (no shell is used)")
		return command, nil
	}
	s.Notes = append(s.Notes, fmt.Sprintf("its command %s was split into command and args, as no shell is used", tomlString(command)))
	return first, fields[1:]
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

// envFile reads an envFile (VS Code, Cursor) and puts its variables in
// s.Env: mcp-mux has no envFile, and the backend got them from it. The
// entry's own env wins, as its values are more specific.
func (c *converter) envFile(s *Server, given string) {
	path, ok := c.resolve(s, given)
	if !ok {
		s.Notes = append(s.Notes, fmt.Sprintf("envFile %s uses a variable that is not set now: its variables are not imported", tomlString(given)))
		s.Warnings = append(s.Warnings, fmt.Sprintf("envFile %q was not read (it uses a variable that is not set)", given))
		return
	}
	if !filepath.IsAbs(path) {
		base := c.project
		if base == "" {
			base = filepath.Dir(c.file.Path)
		}
		path = filepath.Join(base, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("envFile %s could not be read: its variables are not imported", tomlString(path)))
		s.Warnings = append(s.Warnings, fmt.Sprintf("envFile %s could not be read: %v", path, pathErr(err)))
		return
	}
	vars, bad := parseDotenv(data)
	if s.Env == nil && len(vars) > 0 {
		s.Env = map[string]string{}
	}
	n := 0
	for _, kv := range vars {
		if _, set := s.Env[kv[0]]; !set {
			s.Env[kv[0]] = escapeDollars(kv[1], false)
			n++
		}
	}
	note := fmt.Sprintf("its env holds the %d variables of its envFile %s, as mcp-mux has no envFile", n, tomlString(path))
	if len(bad) > 0 {
		note += fmt.Sprintf(" (lines %s of it were not NAME=value and were left out)", strings.Join(bad, ", "))
	}
	s.Notes = append(s.Notes, note)
}

func pathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// parseDotenv reads NAME=value lines (optionally "export NAME=value",
// values optionally in quotes; # starts a comment), in file order. bad
// lists the numbers of the lines it could not read.
func parseDotenv(data []byte) (vars [][2]string, bad []string) {
	for i, line := range strings.Split(string(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			continue
		}
		t = strings.TrimPrefix(t, "export ")
		k, v, ok := strings.Cut(t, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !config.IsEnvVarName(k) {
			bad = append(bad, fmt.Sprint(i+1))
			continue
		}
		switch {
		case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
			v = strings.NewReplacer(`\n`, "\n", `\"`, `"`, `\\`, `\`).Replace(v[1 : len(v)-1])
		case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
			v = v[1 : len(v)-1]
		default:
			if j := strings.Index(v, " #"); j >= 0 {
				v = strings.TrimSpace(v[:j])
			}
		}
		vars = append(vars, [2]string{k, v})
	}
	return vars, bad
}
