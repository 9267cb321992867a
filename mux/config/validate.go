package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/backends/secrets"
)

// Validation: checking the decoded [mux] and [[backend]] values, filling in
// defaults, and expanding ${VAR} in env values.

// FillDefaults gives every key left out (or zero) its default. The mux
// calls it too, so a File built in code behaves like a loaded one.
func (s *Settings) FillDefaults() {
	str := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	num := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	dur := func(v *Duration, d time.Duration) {
		if v.Duration == 0 {
			v.Duration = d
		}
	}
	str(&s.Name, DefaultName)
	str(&s.LogLevel, DefaultLogLevel)
	str(&s.ToolSeparator, DefaultToolSeparator)
	num(&s.MaxSubscriptions, DefaultMaxSubscriptions)
	num(&s.MaxMessageSize, DefaultMaxMessageSize)
	num(&s.RestartMax, DefaultRestartMax)
	dur(&s.RequestTimeout, DefaultRequestTimeout)
	dur(&s.StartupTimeout, DefaultStartupTimeout)
	dur(&s.FirstListWait, DefaultFirstListWait)
	dur(&s.MaxRequestTime, DefaultMaxRequestTime)
	dur(&s.ShutdownGrace, DefaultShutdownGrace)
	dur(&s.RestartWindow, DefaultRestartWindow)
	dur(&s.HTTPSessionIdle, DefaultHTTPSessionIdle)
	dur(&s.DrainTimeout, DefaultDrainTimeout)
	str(&s.ToolList, DefaultToolList)
	num(&s.ToolListMax, DefaultToolListMax)
}

func (p *parser) validateMux(s *Settings, present map[string]bool) {
	mk := func(k string) keyPath { return keyPath{"mux", k} }

	if present["name"] && strings.TrimSpace(s.Name) == "" {
		p.add(mk("name"), "must not be empty (remove the key to use the default %q)", DefaultName)
	}
	switch lvl := strings.ToLower(strings.TrimSpace(s.LogLevel)); lvl {
	case "":
	case "debug", "info", "warn", "error":
		s.LogLevel = lvl
	default:
		msg := fmt.Sprintf("must be one of debug, info, warn, error (got %q)", s.LogLevel)
		if lvl == "warning" {
			msg += `; did you mean "warn"?`
		}
		p.add(mk("log_level"), "%s", msg)
	}

	if s.LogFile != "" {
		p.checkLogFile(mk("log_file"), s)
	}
	if s.AuditLog != "" {
		p.checkOutputFile(mk("audit_log"), &s.AuditLog, "audit lines there would corrupt it (write the audit log to a file)")
	}

	if present["tool_separator"] && s.ToolSeparator == "" {
		p.add(mk("tool_separator"), "must not be empty (remove the key to use the default %q)", DefaultToolSeparator)
	} else if strings.ContainsFunc(s.ToolSeparator, isSpace) {
		p.add(mk("tool_separator"), "must not contain whitespace (got %q)", s.ToolSeparator)
	}

	if s.MaxSubscriptions < 0 {
		p.add(mk("max_subscriptions"), "must not be negative (got %d)", s.MaxSubscriptions)
	}
	if s.MaxMessageSize < 0 || (s.MaxMessageSize > 0 && s.MaxMessageSize < MinMaxMessageSize) {
		p.add(mk("max_message_size"), "must be at least %d bytes (got %d)", MinMaxMessageSize, s.MaxMessageSize)
	}
	if s.RestartMax < 0 {
		p.add(mk("restart_max"), "must not be negative (got %d)", s.RestartMax)
	}

	p.validateHTTP(s, present, mk)

	switch s.ToolList {
	case "", ToolListAll, ToolListSearch, ToolListAuto:
	default:
		p.add(mk("tool_list"), "must be %q (every tool), %q (the pinned tools, search_tools and call_tool) or %q (by agent; the default) (got %q)", ToolListAll, ToolListSearch, ToolListAuto, s.ToolList)
	}
	p.validateStart(mk("start"), s.Start)
	p.validateIdleStop(mk("idle_stop"), s.IdleStop)
	if s.ToolListMax < 0 {
		p.add(mk("tool_list_max"), "must not be negative (got %d)", s.ToolListMax)
	}

	s.FillDefaults()
	if s.MaxRequestTime.Duration < s.RequestTimeout.Duration {
		k := "max_request_time"
		if !present[k] {
			k = "request_timeout"
		}
		p.add(mk(k), "max_request_time (%s) must not be shorter than request_timeout (%s)",
			s.MaxRequestTime.Duration, s.RequestTimeout.Duration)
	}
}

// validateHTTP checks the settings of serving over HTTP: a token that
// expands (its value, a secret, is never shown), and an address that is
// loopback unless a token guards it. A token that is present but empty,
// or whose variable is not set, is a mistake, never "no token": the user
// asked for one (ServeHTTPCheck refuses to serve without it).
func (p *parser) validateHTTP(s *Settings, present map[string]bool, mk func(string) keyPath) {
	if present["http_token"] {
		s.HTTPToken = p.expandToken(mk("http_token"), s.HTTPToken, "remove the key to serve loopback addresses without a token")
	}
	// A [[token]] guards the address as http_token does.
	guarded := s.HTTPToken != "" || p.hasTokens
	if s.HTTPListen != "" {
		if err := CheckHTTPAddr(s.HTTPListen, guarded); err != nil && !present["http_token"] {
			p.add(mk("http_listen"), "%s", err.Error())
		}
	}
	if s.MetricsListen != "" {
		if err := CheckMetricsAddr(s.MetricsListen, guarded); err != nil && !present["http_token"] {
			p.add(mk("metrics_listen"), "%s", err.Error())
		}
	}
	if present["http_advertise"] {
		if err := checkAdvertise(s.HTTPAdvertise); err != nil {
			p.add(mk("http_advertise"), "%s", err.Error())
		}
	}
}

// checkAdvertise checks [mux] http_advertise: the base URL the other
// instances reach this one at, which mux adds /mcp to.
func checkAdvertise(v string) error {
	u, err := url.Parse(v)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("http_advertise %q is not an address the other instances can reach: write it as \"http://host:port\"", v)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.Trim(u.Path, "/") != "":
		return fmt.Errorf("http_advertise %q has more than a scheme, host and port: write it as \"http://host:port\" (mcp-mux adds /mcp)", v)
	case u.Port() == "":
		return fmt.Errorf("http_advertise %q has no port: write it as \"http://host:port\", the port of --http or http_listen", v)
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("http_advertise %q is a wildcard address, which no other instance can reach: name this host as the others reach it", v)
	}
	return nil
}

// expandToken is the bearer token written at k (http_token, a [[token]]'s
// value) with its ${VAR} expanded, reporting what makes it unusable
// without showing it: a token asked for is never "no token". orElse is
// the other fix the message offers.
func (p *parser) expandToken(k keyPath, raw, orElse string) string {
	// The variables set to nothing: the file's value is not what is
	// empty, and the user would look for it there.
	var empty []string
	exp, issues := expandEnv(raw, func(name string) (string, bool) {
		v, ok := p.lookupEnv(name)
		if ok && strings.TrimSpace(v) == "" && !slices.Contains(empty, "${"+name+"}") {
			empty = append(empty, "${"+name+"}")
		}
		return v, ok
	})
	for _, is := range issues {
		p.add(k, "%s", is.message())
	}
	switch {
	case len(issues) > 0:
	case strings.TrimSpace(exp) == "" && len(empty) > 0:
		are := "is"
		if len(empty) > 1 {
			are = "are"
		}
		p.add(k, "is empty: %s %s empty in the environment mcp-mux is started with; set it to a long random value, or %s", strings.Join(empty, " and "), are, orElse)
	case strings.TrimSpace(exp) == "":
		p.add(k, "is empty: set it to a long random value (e.g. \"${MCP_MUX_TOKEN}\" with MCP_MUX_TOKEN set in the environment), or %s", orElse)
	case strings.ContainsAny(exp, "\r\n\x00 "):
		p.add(k, "value contains whitespace, a line break or NUL character")
	}
	return exp
}

// CheckMetricsAddr refuses to serve /metrics on a non-loopback address
// without a token: the backends' names and traffic are not for anyone who
// can reach it.
func CheckMetricsAddr(addr string, guarded bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics address %q: %w (want HOST:PORT, e.g. 127.0.0.1:9464)", addr, err)
	}
	if !guarded && !IsLoopbackHost(host) {
		return fmt.Errorf("metrics address %q is not loopback: anyone who can reach it could read your backends' names and traffic; set [mux] http_token = \"${MCP_MUX_TOKEN}\" (scrapers send it as Authorization: Bearer), or listen on 127.0.0.1", addr)
	}
	return nil
}

// ServeMetricsCheck is whether f's metrics may be served on
// metrics_listen: never with a token the file asks for but that did not
// resolve, and never on a non-loopback address without a token.
func (f *File) ServeMetricsCheck() error {
	if len(f.unusableTokens()) > 0 {
		return fmt.Errorf("not serving metrics on %s: the config asks for a token (http_token or a [[token]]) that is not usable", f.Mux.MetricsListen)
	}
	return CheckMetricsAddr(f.Mux.MetricsListen, f.Guarded())
}

// ServeHTTPCheck is whether f may be served over HTTP on addr: never with
// a token the file asks for but that did not resolve (an unset variable, an
// empty value), whatever the address, and never on a non-loopback address
// without a token.
func (f *File) ServeHTTPCheck(addr string) error {
	if why := f.unusableTokens(); len(why) > 0 {
		return fmt.Errorf("refusing to serve over HTTP: the config asks for a token but it is not usable, and serving without it would let anyone who reaches %s call your tools:\n  %s", addr, strings.Join(why, "\n  "))
	}
	return CheckHTTPAddr(addr, f.Guarded())
}

// Guarded reports whether serving f over HTTP takes a bearer token.
func (f *File) Guarded() bool { return f.Mux.HTTPToken != "" || len(f.Tokens) > 0 }

// unusableTokens are the mistakes LoadForServing forgave in http_token and
// the [[token]] tables, as FILE:LINE: key: what.
func (f *File) unusableTokens() []string {
	var why []string
	for _, w := range f.Warnings {
		if w.Key == "mux.http_token" || w.Key == "token" || strings.HasPrefix(w.Key, "token #") {
			why = append(why, w.String())
		}
	}
	if len(why) == 0 && slices.Contains(f.Invalid, "http_token") {
		why = append(why, "mux.http_token has a mistake")
	}
	return why
}

func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xA0:
		return true
	}
	return r > 0xff && strings.TrimSpace(string(r)) == ""
}

// validateBackends checks and completes the backends' specs. It also
// returns the warnings (what is allowed but probably not meant).
func (p *parser) validateBackends(entries []backendEntry, mux *Settings) ([]Backend, []Problem) {
	var warns []problem
	type seen struct {
		path keyPath
		line int
	}
	firstByName := map[string]seen{}
	enabled := 0
	out := make([]Backend, 0, len(entries))
	for _, e := range entries {
		s := e.spec
		bp := e.path
		unstored := len(p.unstored)
		k := func(name string) keyPath { return append(keyPath{bp[0]}, name) }

		// name
		_, hasName := e.present["name"]
		_, hasCommand := e.present["command"]
		switch {
		case !hasName:
			p.add(k("name"), "missing: every [[backend]] needs a name")
		case !e.present["name"]: // wrong type, reported already
		case s.Name == "":
			p.add(k("name"), "must not be empty")
		case !backendNameRe.MatchString(s.Name):
			p.add(k("name"), "invalid name %q: use only letters, digits, \"_\" and \"-\"", s.Name)
		default:
			if first, dup := firstByName[s.Name]; dup {
				where := displaySeg(first.path[0])
				if first.line > 0 {
					where += fmt.Sprintf(" at line %d", first.line)
				}
				p.add(k("name"), "duplicate backend name %q (already used by %s)", s.Name, where)
			} else {
				firstByName[s.Name] = seen{path: bp, line: p.lineOf(k("name"))}
			}
		}

		// prefix
		if s.Prefix != nil && !prefixRe.MatchString(*s.Prefix) {
			p.add(k("prefix"), "invalid prefix %q: use only letters, digits, \"_\" and \"-\" (or \"\" for no prefix)", *s.Prefix)
		} else if pre := s.EffectivePrefix(); pre != "" && backendNameRe.MatchString(pre) && strings.Contains(pre, mux.ToolSeparator) {
			key := "name"
			if s.Prefix != nil {
				key = "prefix"
			}
			p.add(k(key), "tool prefix %q contains the tool separator %q, so tool names would be ambiguous (set prefix, or change [mux] tool_separator)", pre, mux.ToolSeparator)
		}

		switch s.Protocol {
		case "", backends.ProtocolAuto:
		default:
			p.add(k("protocol"), "must be %q (probe the backend for the current protocol era) or absent (the handshake era, pinned) (got %q)", backends.ProtocolAuto, s.Protocol)
		}

		p.validateStart(k("start"), s.Start)
		p.validateIdleStop(k("idle_stop"), s.IdleStop)
		p.validateShare(k("share"), &s.Share)
		if e.present["share"] && !mux.SharedOn() {
			warns = append(warns, problem{path: k("share"), line: p.lineOf(k("share")), message: "has no effect with [mux] shared = false (each launch runs its own mcp-mux)"})
		}

		// restart
		switch s.Restart {
		case "":
			s.Restart = RestartOnFailure
		case RestartOnFailure, RestartNever:
		default:
			p.add(k("restart"), "must be %q or %q (got %q)", RestartOnFailure, RestartNever, s.Restart)
		}

		// env: expand; never show values.
		if len(s.Env) > 0 {
			env := make(map[string]string, len(s.Env))
			for name, val := range s.Env {
				ek, line := k("env").child(envKeyShown(name)), p.lineOf(k("env").child(name))
				if name == "" || strings.ContainsAny(name, "=\x00") {
					p.addAt(ek, line, "invalid environment variable name (must be non-empty, without \"=\")")
				}
				exp, issues := p.expandSecrets(val)
				for _, is := range issues {
					if (is.unset != "" || is.secret != "") && s.Disabled {
						continue
					}
					p.addAt(ek, line, "%s", is.message())
				}
				if strings.ContainsRune(exp, 0) {
					p.addAt(ek, line, "value contains a NUL character")
				}
				p.warnBareEnvVar(ek, line, val, &warns)
				env[name] = exp
			}
			s.Env = env
		}

		// command and cwd
		remote := p.validateRemote(e, &s, &warns)
		switch {
		case !hasCommand && !remote:
			p.add(k("command"), "missing: every [[backend]] needs a command (a program to run) or a url (a remote MCP server)")
		case !hasCommand: // a remote backend
		case !e.present["command"]: // wrong type, reported already
		case strings.TrimSpace(s.Command) == "":
			p.add(k("command"), "must not be empty")
		}
		p.validateFilters(bp, &s)
		p.validateOverrides(bp, &s, mux.ToolSeparator)
		// "~" and ${VAR} first: messages show the expanded values (they
		// are no secrets), the shell hint the command as written.
		rawCommand, rawArgs := s.Command, slices.Clone(s.Args)
		commandOK, cwdExpanded := true, true
		if msg := swallowedBackslash(s.Command); msg != "" {
			p.add(k("command"), "%s", msg)
			commandOK = false
		} else if strings.TrimSpace(s.Command) != "" {
			s.Command, commandOK = p.expandField(k("command"), s.Command, s.Disabled, &warns)
			if commandOK && !s.Disabled && strings.TrimSpace(s.Command) == "" {
				p.add(k("command"), "is empty once ${...} is expanded")
				commandOK = false
			}
		}
		for i, a := range s.Args {
			if msg := swallowedBackslash(a); msg != "" {
				warns = append(warns, problem{path: k("args").index(i), line: p.lineOf(k("args").index(i)), message: msg})
			}
			s.Args[i], _ = p.expandField(k("args").index(i), a, s.Disabled, &warns)
		}
		if msg := swallowedBackslash(s.Cwd); msg != "" {
			p.add(k("cwd"), "%s", msg)
			cwdExpanded = false
		} else {
			s.Cwd, cwdExpanded = p.expandField(k("cwd"), s.Cwd, s.Disabled, &warns)
		}
		// The agent starts mux in a directory of its choosing: relative
		// paths are made absolute here, against the config file's directory.
		givenCwd, givenCommand := s.Cwd, s.Command
		var cwdNote, commandBase string
		s.Cwd, cwdNote = p.resolvePath(s.Cwd)
		if strings.TrimSpace(s.Command) != "" {
			s.Command, commandBase = p.resolveCommand(s.Command, s.Cwd)
		}
		if !s.Disabled {
			cwdOK := cwdExpanded
			if s.Cwd != "" && cwdOK {
				if fi, err := os.Stat(s.Cwd); err != nil {
					cwdOK = false
					p.add(k("cwd"), "directory %q%s does not exist", givenCwd, cwdNote)
				} else if !fi.IsDir() {
					cwdOK = false
					p.add(k("cwd"), "%q%s is not a directory", givenCwd, cwdNote)
				}
			}
			if strings.TrimSpace(s.Command) != "" && cwdOK && commandOK {
				msg := p.shellHint(rawCommand, s.Command, s.Cwd, rawArgs)
				if msg == "" {
					msg = p.checkCommand(givenCommand, s.Command, commandBase)
				}
				if msg != "" {
					p.add(k("command"), "%s", msg)
				} else if i, msg := batchArgProblem(p.lookPath, s.Command, s.Args); msg != "" {
					p.add(k("args").index(i), "%s", msg)
				}
			}
			enabled++
			if missing := p.unstored[unstored:]; len(missing) > 0 {
				s.MissingSecrets = slices.Compact(slices.Sorted(slices.Values(missing)))
			}
		}
		out = append(out, s)
	}
	if enabled == 0 {
		msg := "no enabled [[backend]]: add at least one [[backend]] section with a name and a command"
		if len(entries) > 0 {
			msg = fmt.Sprintf("no enabled [[backend]] (all %d are disabled)", len(entries))
		}
		p.addAt(nil, 0, "%s", msg)
	}
	p.checkPrefixes(entries, out)
	if mux.SharedLinger.Duration > 0 && !mux.SharedOn() {
		k := keyPath{"mux", "shared_linger"}
		warns = append([]problem{{path: k, line: p.lineOf(k), message: "has no effect with shared = false (each launch runs its own mcp-mux)"}}, warns...)
	}
	return out, p.render(warns)
}

// checkCommand reports ("" if fine) whether command, as written in the
// file, can be executed; path is where it was resolved to (see
// resolveCommand) and base what a relative path was taken relative to.
func (p *parser) checkCommand(command, path, base string) string {
	if hasPathSeparator(command) {
		where := ""
		if path != command {
			where = fmt.Sprintf(" (looked at %q)", path)
		}
		var msg string
		fi, err := statCommand(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			msg = fmt.Sprintf("command %q not found%s", command, where)
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			msg = fmt.Sprintf("command %q cannot be accessed%s: %v", command, where, err)
		case fi.IsDir():
			msg = fmt.Sprintf("command %q is a directory%s", command, where)
		case notExecutable(fi) != "":
			msg = fmt.Sprintf("command %q is not executable%s (%s)", command, where, notExecutable(fi))
		}
		if msg != "" && base != "" {
			msg += ": a relative command path is relative to " + base
		}
		return msg
	}
	if _, err := p.lookPath(command); err != nil {
		if errors.Is(err, exec.ErrDot) {
			return fmt.Sprintf("command %q is only found through a relative PATH entry; use an absolute path", command)
		}
		return fmt.Sprintf("command %q not found on PATH", command)
	}
	return ""
}

// lookPath finds a bare command on the PATH of the environment the file
// is read for, as the backend will be started (backends.CommandPath).
func (p *parser) lookPath(command string) (string, error) {
	return backends.CommandPath(backends.Spec{Command: command}, p.environ)
}

// percentVars is whether %VAR% expands as ${VAR} does: on Windows.
var percentVars = runtime.GOOS == "windows"

type envIssue struct {
	unset     string // name of an unset variable
	store     bool   // with unset: ${secret:NAME} would be expanded where it is
	malformed string // description of a syntax error (never contains the value)
	secret    string // name of a ${secret:NAME} that is not stored (or, with secretErr, could not be read)
	secretErr error
}

// expandEnv expands ${VAR} and ${VAR:-default} (default used when VAR is
// unset or empty) and turns $$ into $. Any other $ is kept as is. On
// Windows %VAR% expands too, as Windows users write it (%APPDATA%), when
// VAR is set; otherwise it is kept, as cmd.exe keeps it.
// ${secret:NAME} is not expanded here (see expandSecrets).
func expandEnv(s string, lookup func(string) (string, bool)) (string, []envIssue) {
	return expandWith(s, lookup, nil)
}

// expandSecrets is expandEnv for the values that may also name a secret of
// the OS store, ${secret:NAME} (env and headers values, and
// oauth_client_secret): a secret kept out of the file.
func (p *parser) expandSecrets(s string) (string, []envIssue) {
	return expandWith(s, p.lookupEnv, p.secret)
}

// secret is the value of ${secret:NAME}, read once per load.
func (p *parser) secret(name string) (string, error) {
	if v, ok := p.secrets[name]; ok {
		return v, nil
	}
	get := p.lookupSecret
	if get == nil {
		get = secrets.Get
	}
	v, err := get(name)
	if errors.Is(err, secrets.ErrNotFound) {
		p.unstored = append(p.unstored, name)
	}
	if err != nil {
		return "", err
	}
	if p.secrets == nil {
		p.secrets = map[string]string{}
	}
	p.secrets[name] = v
	return v, nil
}

// secretPrefix starts a ${...} that names a secret of the OS store.
const secretPrefix = "secret:"

func expandWith(s string, lookup func(string) (string, bool), secret func(string) (string, error)) (string, []envIssue) {
	if !strings.Contains(s, "$") && !(percentVars && strings.Contains(s, "%")) {
		return s, nil
	}
	var b strings.Builder
	var issues []envIssue
	for i := 0; i < len(s); {
		c := s[i]
		if c == '%' && percentVars {
			if end := strings.IndexByte(s[i+1:], '%'); end > 0 && envVarNameRe.MatchString(s[i+1:i+1+end]) {
				if v, ok := lookup(s[i+1 : i+1+end]); ok {
					b.WriteString(v)
					i += end + 2
					continue
				}
			}
		}
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
			continue
		case '{':
		default:
			b.WriteByte('$')
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			issues = append(issues, envIssue{malformed: `"${" without a closing "}" (write ${NAME}, or $$ for a literal "$")`})
			break
		}
		body := s[i+2 : i+2+end]
		i += 2 + end + 1
		if name, ok := strings.CutPrefix(body, secretPrefix); ok {
			switch {
			case secret == nil:
				issues = append(issues, envIssue{malformed: `"${secret:...}" is expanded only in env and headers values and oauth_client_secret`})
			case !secrets.ValidName(name):
				issues = append(issues, envIssue{malformed: `invalid "${secret:...}": write ${secret:NAME}, where NAME has only letters, digits, "_", "-" and "."`})
			default:
				v, err := secret(name)
				switch {
				case errors.Is(err, secrets.ErrNotFound):
					issues = append(issues, envIssue{secret: name})
				case err != nil:
					issues = append(issues, envIssue{secret: name, secretErr: err})
				}
				b.WriteString(v)
			}
			continue
		}
		name, def, hasDef := strings.Cut(body, ":-")
		switch {
		case name == "":
			issues = append(issues, envIssue{malformed: `empty "${}": write ${NAME} or ${NAME:-default}`})
			continue
		case !envVarNameRe.MatchString(name):
			issues = append(issues, envIssue{malformed: `invalid "${...}": write ${NAME} or ${NAME:-default}, where NAME has only letters, digits and "_" (or $$ for a literal "$")`})
			continue
		}
		v, ok := lookup(name)
		if hasDef && (!ok || v == "") {
			v = def
		} else if !ok {
			issues = append(issues, envIssue{unset: name, store: secret != nil})
		}
		b.WriteString(v)
	}
	return b.String(), issues
}

// CheckHTTPAddr refuses to serve a non-loopback address without a token:
// anyone who can reach it could run the user's tools.
func CheckHTTPAddr(addr string, guarded bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("http address %q: %w (want HOST:PORT, e.g. 127.0.0.1:8931)", addr, err)
	}
	if !guarded && !IsLoopbackHost(host) {
		return fmt.Errorf("http address %q is not loopback: anyone who can reach it could call your tools; set [mux] http_token = \"${MCP_MUX_TOKEN}\" (and send it as Authorization: Bearer), or listen on 127.0.0.1", addr)
	}
	return nil
}

// IsLoopbackHost reports whether host (a name or an IP) is this machine.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
