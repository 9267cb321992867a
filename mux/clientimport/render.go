package clientimport

// Writing the servers read by import.go as a commented mcp-mux config: a
// header saying where it came from, then one [[backend]] per server, with
// comments saying what was changed and what looks like a secret. A remote
// server is a backend with url, transport and headers. The servers mcp-mux
// cannot load as written are kept commented out, with the reason. Every value is escaped here, never pasted: the file must parse
// back to exactly what the client had (see TestImportedValuesParseBackIntact).

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// Result is the TOML written by Render and what is in it. The
// lists name backends and keys, never a value.
type Result struct {
	TOML       []byte
	Backends   []string // the backends written (enabled or disabled)
	Disabled   []string // those written with disabled = true
	Commented  []string // "NAME: reason" of the entries kept commented out
	Duplicates []string // `"NAME" in FILE` left out as the same as an earlier server
	Renamed    []string // `"ORIGINAL" → NAME`
	Secrets    []string // "NAME.env.KEY" (or .headers., .args #N, from 1) whose value looks like a secret
	Vars       []string // the environment variables the config refers to
	Warnings   []string

	sources []source // every server read, and the backend it became
}

// source is a server of a client's file and the backend it became (or,
// kept commented out, would have become).
type source struct {
	srv     *Server
	file    *File
	backend string
}

// Render writes the servers of files as one mcp-mux config.
func Render(files []*File) *Result { return RenderBeside(files, nil) }

// RenderBeside is Render for a config added to one whose backends are
// named taken: no backend gets one of those names.
func RenderBeside(files []*File, taken []string) *Result {
	res := &Result{}
	w := &tomlWriter{}
	type def struct {
		srv  *Server
		file *File
	}
	type entry struct {
		def
		name  string
		taken string // the name it would have had, another server's
		also  []def  // the same server, defined elsewhere too
	}
	var entries []*entry
	used := map[string]bool{}
	for _, n := range taken {
		used[n] = true
	}
	seen := map[string]*entry{}
	for _, f := range files {
		for i := range f.Servers {
			s := &f.Servers[i]
			for _, warn := range s.Warnings {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%q in %s: %s", s.Name, f.Path, warn))
			}
			key := identity(s)
			if first, dup := seen[key]; dup {
				// Imported once, as the first file read has it; but not
				// disabled for a project that is gone when it is also
				// defined for one that is not.
				d := def{s, f}
				if first.srv.ProjectGone && !s.ProjectGone {
					d, first.def = first.def, d
				}
				first.also = append(first.also, d)
				res.Duplicates = append(res.Duplicates, fmt.Sprintf("%q in %s (the same as %s)", d.srv.Name, d.file.Path, first.name))
				continue
			}
			e := &entry{def: def{s, f}, name: sanitizeName(s.Name)}
			if used[e.name] {
				e.taken = e.name
				for n := 2; used[e.name]; n++ {
					e.name = fmt.Sprintf("%s-%d", e.taken, n)
				}
			}
			used[e.name] = true
			seen[key] = e
			entries = append(entries, e)
			if s.Unusable != "" {
				continue // commented out: nothing of it is loaded
			}
			for _, v := range s.Vars {
				if !slices.Contains(res.Vars, v) {
					res.Vars = append(res.Vars, v)
				}
			}
		}
	}
	sort.Strings(res.Vars)
	for _, e := range entries {
		if e.name != e.srv.Name {
			res.Renamed = append(res.Renamed, fmt.Sprintf("%q → %s", e.srv.Name, e.name))
		}
		for _, d := range append([]def{e.def}, e.also...) {
			res.sources = append(res.sources, source{srv: d.srv, file: d.file, backend: e.name})
		}
	}
	// where names the file (and project) of a definition.
	where := func(d def) string {
		out := fmt.Sprintf("%s (%s", d.file.Path, d.file.Client)
		if d.srv.Project != "" {
			out += ", project " + d.srv.Project
		}
		return out + ")"
	}

	// Secrets are found first: the header explains them.
	secrets := map[*Server]map[string]string{} // server → key → reason
	for _, e := range entries {
		m := findSecrets(e.srv)
		secrets[e.srv] = m
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			res.Secrets = append(res.Secrets, e.name+"."+k)
		}
	}

	w.comment("mcp-mux configuration, written by `mcp-mux import` from:")
	for _, f := range files {
		n := len(f.Servers)
		w.line("#   " + commentSafe(fmt.Sprintf("%s (%s): %d server%s", f.Path, f.Client, n, plural(n))))
	}
	w.line("#")
	w.comment("Check it with `mcp-mux check --config FILE` (with --connect it also starts every backend and lists what each offers). Every key is described in https://github.com/mcp-mux/mcp-mux/blob/main/mcp-mux.toml.example; `mcp-mux init --output FILE` writes a commented starter.")
	w.line("#")
	w.comment("Each [[backend]] is one MCP server, which mcp-mux runs as a child process, never through a shell. The agent sees its tools and prompts prefixed with its name and \"__\" (backend \"github\", tool \"search\": \"github__search\"). A backend gets a minimal environment (PATH, HOME, ...) and its env table; inherit_env passes more of mcp-mux's environment.")
	if slices.ContainsFunc(entries, func(e *entry) bool { return e.srv.Remote() && e.srv.Unusable == "" }) {
		w.line("#")
		w.comment("A [[backend]] with url instead of command is a remote MCP server, which mcp-mux connects to over HTTP (transport \"auto\": Streamable HTTP, falling back to the older HTTP+SSE; \"streamable\" or \"sse\": that one only). Its headers are sent with every request to it.")
	}
	for _, f := range files {
		for _, n := range f.Notes {
			w.line("#")
			w.comment(commentSafe(f.Path) + ": " + n)
		}
	}
	if len(res.Secrets) > 0 {
		// The examples are the first secrets of each kind, in the
		// order of the file, so that the text is the same every run.
		envEx, headerEx := "", ""
		for _, e := range entries {
			for _, k := range sortedKeys(secrets[e.srv]) {
				if name, ok := strings.CutPrefix(k, "env."); ok && envEx == "" && config.IsEnvVarName(name) {
					envEx = fmt.Sprintf("%s = \"${%s}\"", name, name)
				}
				if name, ok := strings.CutPrefix(k, "headers."); ok && headerEx == "" {
					headerEx = headerSecretExample(e.name, name, e.srv.Headers[name])
				}
			}
		}
		examples := envEx
		switch {
		case headerEx != "" && envEx != "":
			examples = envEx + " or, for a header, " + headerEx
		case headerEx != "":
			examples = headerEx
		case envEx == "":
			examples = `API_TOKEN = "${API_TOKEN}"`
		}
		w.line("#")
		w.comment("Secrets: the values marked \"looks like a secret\" below are kept as they were written. To keep one out of this file, write a variable instead, as in " +
			examples + ", and set the variable in the \"env\" of mcp-mux's own entry in the agent's config: mcp-mux expands ${NAME} from its environment when it loads this file, and check reports a variable that is not set.")
	}
	if len(res.Vars) > 0 {
		refs := make([]string, len(res.Vars))
		for i, v := range res.Vars {
			refs[i] = "${" + v + "}"
		}
		w.line("#")
		w.comment(fmt.Sprintf("Variables: this file refers to %s. mcp-mux takes their values from its own environment when it loads this file: set them in the \"env\" of mcp-mux's entry in the agent's config.", strings.Join(refs, ", ")))
	}
	if len(res.Duplicates) > 0 {
		w.line("#")
		w.comment("Defined more than once, imported once: " + commentSafe(strings.Join(res.Duplicates, "; ")) + ".")
	}

	for _, e := range entries {
		s := e.srv
		origin := tomlString(s.Name) + " from " + where(e.def)
		if base := cmp.Or(e.taken, e.name); base != s.Name {
			origin += ", renamed: a name holds only letters, digits, \"_\" and \"-\""
		}
		if e.taken != "" {
			origin += fmt.Sprintf(", named %s as %s is another server's", e.name, e.taken)
		}
		w.line("")
		w.comment(origin + ".")
		for _, d := range e.also {
			also := "Also defined, the same, in " + where(d)
			if d.srv.Name != s.Name {
				also += " as " + tomlString(d.srv.Name)
			}
			if d.srv.CwdIsProject && !s.CwdIsProject {
				also += ", where it runs in the project's directory"
			}
			w.comment(also + ".")
		}
		for _, n := range s.Notes {
			w.comment(capitalize(n) + ".")
		}
		prefix := ""
		if s.Unusable != "" {
			w.comment("Not imported, as " + s.Unusable + ". As it was written:")
			res.Commented = append(res.Commented, e.name+": "+s.Unusable)
			prefix = "# "
		} else {
			res.Backends = append(res.Backends, e.name)
			if s.Disabled {
				res.Disabled = append(res.Disabled, e.name)
			}
		}
		w.backend(prefix, e.name, s, secrets[s])
	}
	res.TOML = []byte(w.b.String())
	return res
}

// BackendOf is the backend that server s of file f became, "" if none
// (it is kept commented out, or was not rendered).
func (r *Result) BackendOf(f *File, s *Server) string {
	for _, d := range r.sources {
		if d.file == f && d.srv == s && s.Unusable == "" {
			return d.backend
		}
	}
	return ""
}

// headerSecretExample shows how the header name of backend would refer to
// a variable instead of its literal value, keeping the value's scheme
// ("Bearer ", "Basic ") as the server expects it.
func headerSecretExample(backend, name, value string) string {
	scheme := ""
	if sch, rest, ok := strings.Cut(value, " "); ok && rest != "" && !strings.Contains(rest, " ") && authSchemeRe.MatchString(sch) {
		scheme = sch + " "
	}
	variable := inputVarName(backend) + "_TOKEN"
	return tomlKey(name) + " = " + tomlString(scheme+"${"+variable+"}")
}

var authSchemeRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`)

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// identity is what makes two entries the same server: all of it but the
// project it belongs to (the directory it runs in when it names none, and
// whether that directory still exists).
func identity(s *Server) string {
	cwd := s.Cwd
	if s.CwdIsProject {
		cwd = ""
	}
	b, _ := json.Marshal(struct {
		Command, Cwd, URL, Transport, Unusable string
		Args                                   []string
		Env, Headers                           map[string]string
		Disabled                               bool
	}{s.Command, cwd, s.URL, s.Transport, s.Unusable, s.Args, s.Env, s.Headers, s.Disabled && !s.ProjectGone})
	return string(b)
}

var (
	nameBadRe   = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
	underscores = regexp.MustCompile(`__+`)
)

// sanitizeName makes a client's server name a backend name: [A-Za-z0-9_-]+,
// without "__" (the default tool separator, which a prefix may not hold).
func sanitizeName(name string) string {
	n := nameBadRe.ReplaceAllString(name, "-")
	n = underscores.ReplaceAllString(n, "_")
	n = strings.Trim(n, "-")
	if n == "" {
		n = "server"
	}
	return n
}

// tomlWriter builds the TOML text.
type tomlWriter struct{ b strings.Builder }

func (w *tomlWriter) line(s string) {
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

// comment writes text as # lines wrapped at about 78 columns.
func (w *tomlWriter) comment(text string) {
	line := "#"
	for _, word := range strings.Fields(commentSafe(text)) {
		if len(line) > 1 && len(line)+1+len(word) > 78 {
			w.line(line)
			line = "#"
		}
		line += " " + word
	}
	w.line(line)
}

// backend writes one [[backend]], each line after prefix ("# " to keep it
// commented out).
func (w *tomlWriter) backend(prefix, name string, s *Server, secrets map[string]string) {
	mark := func(key string) {
		if why := secrets[key]; why != "" {
			w.line(prefix + "# " + commentSafe(key) + " looks like a secret (" + why + "): see \"Secrets\" at the top of this file")
		}
	}
	w.line(prefix + "[[backend]]")
	w.line(prefix + "name = " + tomlString(name))
	if s.Remote() {
		w.line(prefix + "url = " + tomlString(s.URL))
		w.line(prefix + "transport = " + tomlString(s.Transport))
	} else {
		if s.Command != "" {
			w.line(prefix + "command = " + tomlString(s.Command))
		}
		if len(s.Args) > 0 {
			for i := range s.Args {
				mark(fmt.Sprintf("args #%d", i+1))
			}
			w.line(prefix + "args = " + tomlArray(s.Args))
		}
		if s.Cwd != "" {
			w.line(prefix + "cwd = " + tomlString(s.Cwd))
		}
	}
	if s.Disabled {
		w.line(prefix + "disabled = true")
	}
	table := func(name string, m map[string]string) {
		if len(m) == 0 {
			return
		}
		w.line("")
		w.line(prefix + "[backend." + name + "]")
		for _, k := range sortedKeys(m) {
			mark(name + "." + k)
			w.line(prefix + tomlKey(k) + " = " + tomlString(m[k]))
		}
	}
	table("env", s.Env)
	table("headers", s.Headers)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tomlString quotes s as a TOML string: a 'literal string' when s has
// backslashes or quotes (Windows paths read as written), else a "basic
// string" with every character TOML does not allow raw escaped.
func tomlString(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	literalOK := !strings.ContainsFunc(s, func(r rune) bool { return r == '\'' || (r < 0x20 && r != '\t') || r == 0x7f })
	if literalOK && strings.ContainsAny(s, `\"`) {
		return "'" + s + "'"
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlKey writes k bare when TOML allows it, else quoted.
func tomlKey(k string) string {
	if config.IsBareKey(k) {
		return k
	}
	return tomlString(k)
}

func tomlArray(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// commentSafe makes text fit in a # comment: TOML allows no control
// character there but tab.
func commentSafe(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	if !strings.ContainsFunc(text, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }) {
		return text
	}
	var b strings.Builder
	for _, r := range text {
		if (r < 0x20 && r != '\t') || r == 0x7f {
			fmt.Fprintf(&b, `\u%04X`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// findSecrets returns the keys ("env.NAME", "headers.NAME", "args #N",
// counted from 1 as check counts) of s whose literal values look like
// secrets, with why.
func findSecrets(s *Server) map[string]string {
	out := map[string]string{}
	for k, v := range s.Env {
		if why := secretReason(k, v); why != "" {
			out["env."+k] = why
		}
	}
	for k, v := range s.Headers {
		if why := secretReason(k, v); why != "" {
			out["headers."+k] = why
		}
	}
	for i, a := range s.Args {
		flag := ""
		if i > 0 && strings.HasPrefix(s.Args[i-1], "-") {
			flag = s.Args[i-1]
		}
		if f, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(f, "-") {
			flag, a = f, v
		}
		if why := secretReason(flag, a); why != "" {
			out[fmt.Sprintf("args #%d", i+1)] = why
		}
	}
	return out
}

var (
	secretPrefixes = []string{"sk-", "sk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
		"xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xapp-", "AKIA", "ASIA", "AIza", "ya29.", "npm_", "pk_live_",
		"rk_live_", "hf_", "shpat_", "lin_api_", "pplx-", "gsk_", "Bearer ", "Basic ", "eyJ"}
	urlPasswordRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]+:[^/@\s]+@`)
	tokenCharsRe  = regexp.MustCompile(`^[A-Za-z0-9+/=_.~-]+$`)
)

// secretReason says why the value of name looks like a secret, "" if it
// does not. Only literal text counts: a value that is all ${NAME} is not
// a secret in the file.
func secretReason(name, value string) string {
	literal := clientVarRe.ReplaceAllString(value, "")
	if strings.TrimSpace(literal) == "" {
		return ""
	}
	for _, p := range secretPrefixes {
		if strings.HasPrefix(literal, p) && len(literal) >= len(p)+8 {
			return "its value looks like a token"
		}
	}
	if urlPasswordRe.MatchString(literal) {
		return "its value is a URL with a password"
	}
	// A value that refers to a variable ("Bearer ${TOKEN}") is judged by
	// its literal text alone.
	if config.LooksLikeSecretName(name) && !clientVarRe.MatchString(value) {
		return "its name"
	}
	if looksLikeToken(literal) {
		return "its value looks like a token"
	}
	return ""
}

// looksLikeToken: long, no spaces, not a path, several kinds of
// characters and high entropy, as generated keys are.
func looksLikeToken(v string) bool {
	if utf8.RuneCountInString(v) < 20 || !tokenCharsRe.MatchString(v) || strings.HasPrefix(v, "/") ||
		strings.HasPrefix(v, ".") || strings.HasPrefix(v, "~") || strings.Count(v, "/") > 2 {
		return false
	}
	var upper, lower, digit int
	counts := map[rune]int{}
	for _, r := range v {
		counts[r]++
		switch {
		case r >= 'A' && r <= 'Z':
			upper = 1
		case r >= 'a' && r <= 'z':
			lower = 1
		case r >= '0' && r <= '9':
			digit = 1
		}
	}
	if upper+lower+digit < 2 || digit == 0 {
		return false
	}
	entropy := 0.0
	n := float64(len(v))
	for _, c := range counts {
		p := float64(c) / n
		entropy -= p * math.Log2(p)
	}
	return entropy >= 3.5
}
