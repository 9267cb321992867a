// Package config reads mcp-mux's TOML file: the schema (File, Settings,
// Backend), decoding with a line number for every key, validation that
// reports every mistake at once as FILE:LINE, defaults, where the file is
// looked for (find.go), paths (paths.go), ${VAR} expansion and the
// forgiving messages for what users get wrong (forgive.go, secrets.go). It
// runs nothing: a Backend's Spec is what the backends package runs, and
// the rest (prefix, filters, timeouts) is what mux exposes.
//
// The config file is hand-edited TOML. Every mistake is reported as
// "FILE:LINE: key: what is wrong", and all mistakes are reported at once
// (a *Error), so `mcp-mux check` can list them in one go.
//
// Decoding is done in two steps: the TOML library parses the document into
// plain maps (syntax errors come from there, with a line number), then the
// maps are copied into the Go structs key by key (decode.go), so that
// every unknown key and every value of the wrong type is reported, not just
// the first one. The values are then checked (validate.go). The TOML
// library does not expose the line of each key, so a small scanner
// (scanKeyLines, lines.go) records the line where each key path is
// defined.
//
// Secrets: the values of env entries are never put in a message (see
// secrets.go). Paths: relative ones start at the config file's
// directory (see paths.go).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// File is the whole config file.
type File struct {
	Path     string    `toml:"-"`       // the file it was loaded from
	Mux      Settings  `toml:"mux"`     // [mux]
	Backends []Backend `toml:"backend"` // [[backend]], order = precedence
	Profiles []Profile `toml:"-"`       // [profile.NAME], in file order (profile.go)
	Tokens   []Token   `toml:"-"`       // [[token]], serve --http's keys of the team's members (token.go)
	// Warnings are what is not wrong enough to refuse the file but
	// probably not what was meant (e.g. a bare $NAME that is not
	// expanded): check prints them, serve logs them.
	Warnings []Problem `toml:"-"`
	// Invalid are the [mux] keys whose mistakes LoadForServing left at
	// their defaults (the mistakes are among the Warnings).
	Invalid []string `toml:"-"`
	// Problems are the mistakes LoadForServing forgave, every one as Load
	// would have refused the file with them: check --connect starts what
	// they leave able to start, and still fails because of them.
	Problems []Problem `toml:"-"`
}

// Settings is the [mux] table.
type Settings struct {
	Name             string   `toml:"name"`              // serverInfo name, default "mcp-mux"
	LogLevel         string   `toml:"log_level"`         // debug|info|warn|error, default "info"
	LogFile          string   `toml:"log_file"`          // default "" = stderr
	RequestTimeout   Duration `toml:"request_timeout"`   // default 60s
	StartupTimeout   Duration `toml:"startup_timeout"`   // default 30s
	FirstListWait    Duration `toml:"first_list_wait"`   // how long the first list waits for backends still starting, default 3s
	MaxSubscriptions int      `toml:"max_subscriptions"` // per client session, default 1000
	ToolSeparator    string   `toml:"tool_separator"`    // default "__"
	MaxRequestTime   Duration `toml:"max_request_time"`  // hard cap for progress-extended requests, default 10m
	MaxMessageSize   int      `toml:"max_message_size"`  // bytes, default 16 MiB, >= 1024
	ShutdownGrace    Duration `toml:"shutdown_grace"`    // time to exit after stdin close before SIGTERM, default 2s
	RestartMax       int      `toml:"restart_max"`       // crashes within RestartWindow before "failed", default 5
	RestartWindow    Duration `toml:"restart_window"`    // default 60s
	Instructions     string   `toml:"instructions"`      // default "": the backends' own, merged
	// Serving over HTTP (serve --http, or this key): the address, the
	// bearer token it requires (expanded like env values; never logged),
	// and how long an idle HTTP session lives.
	HTTPListen      string   `toml:"http_listen"`       // default "": stdio only
	HTTPToken       string   `toml:"http_token"`        // default "": none (loopback only)
	HTTPSessionIdle Duration `toml:"http_session_idle"` // default 30m
	// DrainTimeout bounds how long serve --http lets the requests in
	// flight finish after SIGTERM before it exits: a little under the 30 s
	// an orchestrator (Kubernetes) waits before it kills.
	DrainTimeout Duration `toml:"drain_timeout"` // default 25s
	// Where the other instances of this config reach this one, to hand it
	// an agent's retry of a call it holds: "http://host:port".
	HTTPAdvertise string `toml:"http_advertise"` // default "": the listener's address, unless it is a wildcard
	// What mcp-mux records for whoever runs it: the address a stdio
	// mcp-mux serves /metrics on (serve --http serves them on its own
	// listener; a non-loopback address needs http_token, and then
	// requires it), and the audit log of tool calls, prompts and reads
	// (argument names only, unless audit_arguments).
	MetricsListen  string `toml:"metrics_listen"`  // default "": none
	AuditLog       string `toml:"audit_log"`       // default "": none
	AuditArguments bool   `toml:"audit_arguments"` // default false: names only
	// The tool list each agent session gets: "all" (every tool), "search"
	// (the pinned tools, then search_tools and call_tool) or "auto" (by
	// what the agent is: every tool, up to the agent's own limit).
	ToolList    string `toml:"tool_list"`     // default "auto"
	ToolListMax int    `toml:"tool_list_max"` // auto: search past this many tools, for an agent the small list is chosen for (Claude Desktop); default 64

	// Start is when a backend starts: StartAuto (the default), StartEager
	// or StartLazy; a backend's own start overrides it.
	Start string `toml:"start"`
	// IdleStop, when set, stops a backend that has had nothing to do for
	// this long (no request, subscription or request of its own in flight);
	// its catalog stays listed and the next use starts it. Default: never.
	IdleStop Duration `toml:"idle_stop"`

	// Shared runs one long-lived mcp-mux per config file for all of the
	// user's stdio agent sessions; nil is the default (true), which
	// MCP_MUX_SHARED=0 turns off for one launch, and false runs each
	// launch in-process. Read it with SharedOn.
	Shared *bool `toml:"shared"`
	// SharedLinger is how long the shared mcp-mux outlives its last
	// session (0: it ends with it).
	SharedLinger Duration `toml:"shared_linger"`
}

// SharedOn is [mux] shared, true unless the file sets it to false.
func (s *Settings) SharedOn() bool { return s.Shared == nil || *s.Shared }

// Defaults of [mux]; a zero value in the file (or a missing key) means the default.
const (
	DefaultName             = "mcp-mux"
	DefaultLogLevel         = "info"
	DefaultRequestTimeout   = 60 * time.Second
	DefaultStartupTimeout   = 30 * time.Second
	DefaultFirstListWait    = 3 * time.Second
	DefaultHTTPSessionIdle  = 30 * time.Minute
	DefaultDrainTimeout     = 25 * time.Second
	DefaultToolList         = ToolListAuto
	DefaultToolListMax      = 64
	DefaultMaxSubscriptions = 1000
	DefaultToolSeparator    = "__"
	DefaultMaxRequestTime   = 10 * time.Minute
	DefaultMaxMessageSize   = 16 << 20
	MinMaxMessageSize       = 1024
	DefaultShutdownGrace    = 2 * time.Second
	DefaultRestartMax       = 5
	DefaultRestartWindow    = 60 * time.Second

	RestartOnFailure = "on-failure"
	RestartNever     = "never"

	// A backend's share: ShareAuto shares it between the sessions for
	// which its resolved command, args, cwd and env are the same;
	// ShareAlways runs one for all sessions (the first session's
	// environment); ShareNever one per session.
	ShareAuto   = "auto"
	ShareAlways = "always"
	ShareNever  = "never"

	ToolListAll    = "all"
	ToolListSearch = "search"
	ToolListAuto   = "auto"
)

// Problem is one mistake in the config file.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`          // 0 if unknown
	Key     string `json:"key,omitempty"` // e.g. "backend #2 (github).env.TOKEN" (counting from 1); may be empty
	Message string `json:"message"`
}

// String formats the problem as "FILE:LINE: key: message".
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	} else if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error lists every problem found in a config file.
type Error struct {
	Problems []Problem
}

// Error returns all problems, one per line.
func (e *Error) Error() string {
	if len(e.Problems) == 0 {
		return "invalid config"
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Load reads, decodes and validates the config file at path, expanding env
// values from the process environment. On failure the error is a
// *Error listing every problem.
func Load(path string) (*File, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, os.LookupEnv)
}

// readFile reads the config file at path, or says why it cannot (a *Error).
func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &Error{Problems: []Problem{{File: path, Message: "cannot read config file: " + err.Error()}}}
	}
	return data, nil
}

// LoadForServing is Load for mcp-mux serving: one mistake in the file must
// not cost the user the other servers. A mistake that belongs to one
// [[backend]] marks that backend Broken (mux shows it failed, and serves the
// rest); a mistake elsewhere (a [mux] key, an unknown table) leaves what it
// concerns at its default and becomes a warning. Only a file that cannot be
// read or parsed at all is an error (a *Error).
func LoadForServing(path string) (*File, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return ParseForServing(path, data, os.LookupEnv)
}

// LoadForServingIn is LoadForServing for a session whose environment is
// environ rather than mcp-mux's own (the shared mcp-mux serves sessions
// launched by other agents): ${VAR} is expanded from environ, and a bare
// command is looked for on its PATH. A nil environ is LoadForServing.
func LoadForServingIn(path string, environ []string) (*File, error) {
	if environ == nil {
		return LoadForServing(path)
	}
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	p := &parser{file: path, dir: absDirOf(path), lookupEnv: lookupIn(environ), environ: environ}
	return p.forServing(data)
}

// lookupIn is os.LookupEnv on environ: the last entry of a name, as a
// backend's child environment keeps it (backends.ChildEnv); on Windows
// names are compared regardless of case, as there.
func lookupIn(environ []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for i := len(environ) - 1; i >= 0; i-- {
			k, v, ok := strings.Cut(environ[i], "=")
			if ok && (k == name || runtime.GOOS == "windows" && strings.EqualFold(k, name)) {
				return v, true
			}
		}
		return "", false
	}
}

// ParseForServing is LoadForServing on data already read from path.
func ParseForServing(path string, data []byte, lookupEnv func(string) (string, bool)) (*File, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	p := &parser{file: path, dir: absDirOf(path), lookupEnv: lookupEnv}
	return p.forServing(data)
}

// forServing parses data as LoadForServing does.
func (p *parser) forServing(data []byte) (*File, error) {
	cfg := p.parse(data)
	if cfg == nil {
		return nil, &Error{Problems: p.finish()}
	}
	p.lenient(cfg)
	return cfg, nil
}

// Parse is Load on data already read from path (path is used in messages
// and to fill Config.Path). lookupEnv resolves ${VAR} in env values; nil
// means os.LookupEnv.
func Parse(path string, data []byte, lookupEnv func(string) (string, bool)) (*File, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	p := &parser{file: path, dir: absDirOf(path), lookupEnv: lookupEnv}
	cfg := p.parse(data)
	if len(p.problems) > 0 {
		return nil, &Error{Problems: p.finish()}
	}
	return cfg, nil
}

// keyPath is a key as a list of formatted segments: "backend[2]", "env",
// "\"odd.key\"". Joined with "." it is both the key shown to the user and the
// key of the line index built by scanKeyLines.
type keyPath []string

func (k keyPath) String() string { return strings.Join(k, ".") }

// child returns k + name (name is a raw TOML key, formatted here).
func (k keyPath) child(name string) keyPath {
	out := make(keyPath, len(k), len(k)+1)
	copy(out, k)
	return append(out, fmtSeg(name))
}

// index returns k with "[i]" added to its last segment.
func (k keyPath) index(i int) keyPath {
	out := make(keyPath, len(k))
	copy(out, k)
	if len(out) == 0 {
		return keyPath{fmt.Sprintf("[%d]", i)}
	}
	out[len(out)-1] += fmt.Sprintf("[%d]", i)
	return out
}

// fmtSeg formats one raw key segment: bare if possible, quoted otherwise.
func fmtSeg(name string) string {
	if bareKeyRe.MatchString(name) {
		return name
	}
	return strconv.Quote(name)
}

type problem struct {
	path    keyPath
	line    int
	message string
}

type parser struct {
	file      string
	dir       string // absolute directory of file: relative paths in it start there
	lookupEnv func(string) (string, bool)
	// environ, when set, is the environment the file is read for (a
	// session's): a bare command is looked for on its PATH (lookPath).
	environ []string
	// lookupSecret is the value of ${secret:NAME} (nil: the OS store,
	// secrets.Get); secrets holds those read so far.
	lookupSecret func(string) (string, error)
	secrets      map[string]string
	unstored     []string       // the ${secret:NAME} names not stored, as met (Backend.MissingSecrets)
	lines        map[string]int // key path → line
	problems     []problem
	names        map[int]string // backend index → valid name, for display
	tokenNames   map[int]string // the same of [[token]]s
	hasTokens    bool           // the file has [[token]] tables: a token guards serving over HTTP
	entries      []backendEntry // the [[backend]] tables, in order (cfg.Backends is the same length)
	scan         *lineScanner
}

func (p *parser) lineOf(k keyPath) int {
	for i := len(k); i > 0; i-- {
		if l, ok := p.lines[k[:i].String()]; ok {
			return l
		}
	}
	return 0
}

func (p *parser) add(k keyPath, format string, args ...any) {
	p.addAt(k, p.lineOf(k), format, args...)
}

func (p *parser) addAt(k keyPath, line int, format string, args ...any) {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	p.problems = append(p.problems, problem{path: k, line: line, message: msg})
}

// finish turns the collected problems into Problems sorted by line (problems
// without a line last), decorating backend keys with the backend's name.
func (p *parser) finish() []Problem {
	sort.SliceStable(p.problems, func(i, j int) bool {
		li, lj := p.problems[i].line, p.problems[j].line
		if (li == 0) != (lj == 0) {
			return lj == 0
		}
		return li < lj
	})
	out := make([]Problem, len(p.problems))
	for i, pr := range p.problems {
		k := make(keyPath, len(pr.path))
		for j, seg := range pr.path {
			k[j] = displaySeg(seg)
		}
		if len(k) > 0 {
			for _, named := range []struct {
				re    *regexp.Regexp
				names map[int]string
			}{{backendSegRe, p.names}, {tokenSegRe, p.tokenNames}} {
				if m := named.re.FindStringSubmatch(pr.path[0]); m != nil {
					if idx, err := strconv.Atoi(m[1]); err == nil {
						if name, ok := named.names[idx]; ok {
							k[0] = fmt.Sprintf("%s (%s)", k[0], name)
						}
					}
				}
			}
		}
		out[i] = Problem{File: p.file, Line: pr.line, Key: k.String(), Message: pr.message}
	}
	return out
}

// indexSuffixRe is the "[i]" that keyPath.index puts at the end of a
// segment.
var indexSuffixRe = regexp.MustCompile(`\[([0-9]+)\]$`)

// displaySeg shows a key segment to the user, who counts from 1: the
// fourth [[backend]], "backend[3]" in the key paths (which index the line
// table), is "backend #4"; "args[0]" is "args #1".
func displaySeg(seg string) string {
	var nums []string
	for {
		m := indexSuffixRe.FindStringSubmatchIndex(seg)
		if m == nil {
			break
		}
		n, err := strconv.Atoi(seg[m[2]:m[3]])
		if err != nil {
			break
		}
		nums = append([]string{fmt.Sprintf("#%d", n+1)}, nums...)
		seg = seg[:m[0]]
	}
	if len(nums) == 0 {
		return seg
	}
	if seg == "" {
		return strings.Join(nums, " ")
	}
	return seg + " " + strings.Join(nums, " ")
}

// Limits that keep absurd input (a config file is a few KiB of flat tables)
// from making the TOML parser slow or exhausting the stack.
const (
	maxConfigSize = 1 << 20
	maxNesting    = 32
)

func (p *parser) parse(data []byte) (cfg *File) {
	if len(data) > maxConfigSize {
		p.addAt(nil, 0, "file is too large (%d bytes, at most %d)", len(data), maxConfigSize)
		return nil
	}
	if LooksLikeJSON(data) {
		p.addAt(nil, 0, "this is a JSON client config, not mcp-mux's TOML; run `mcp-mux import %s` to convert it", ShellQuote(p.file))
		return nil
	}
	// The line index is built first: the scanner also rejects deeply
	// nested arrays and inline tables before the TOML parser sees them.
	scan := scanFile(data)
	if scan.tooDeep > 0 {
		p.addAt(nil, scan.tooDeep, "arrays or inline tables nested more than %d deep", maxNesting)
		return nil
	}
	p.scan = scan
	top, err := decodeTOML(data)
	var pe toml.ParseError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Message, "Key 'backend' was already created") && p.addEarly() {
		return nil
	}
	if err != nil {
		if errors.As(err, &pe) {
			// The library's own line is its lexer's, often the next one,
			// and its column does not belong to either: both are taken
			// from the byte offset of the error instead.
			line, col := offsetPosition(data, pe.Position.Start)
			msg := syntaxMessage(pe, col)
			if strings.Contains(pe.Message, "terminator") {
				if l, c, open, ok := unclosedAt(data, pe.Position.Start); ok {
					msg += fmt.Sprintf("; the %q opened at line %d, column %d is not closed", open, l, c)
				}
			}
			if strings.Contains(pe.Message, "has already been defined") {
				if first := firstLineOfKey(data, pe.Position.Start, line); first > 0 {
					msg += fmt.Sprintf(" (first at line %d)", first)
				}
			}
			p.addAt(nil, line, "TOML syntax error: %s", msg)
		} else {
			p.addAt(nil, 0, "TOML syntax error: the file cannot be parsed")
		}
		return nil
	}
	p.lines = scan.lines
	p.names = map[int]string{}
	p.tokenNames = map[int]string{}

	cfg = &File{Path: p.file}
	var muxPresent map[string]bool
	var specs []backendEntry
	var profiles []Profile
	var tokens []tokenEntry
	for _, k := range p.sortedKeys(nil, top) {
		kp := keyPath{}.child(k)
		v := top[k]
		switch k {
		case "mux":
			tbl, ok := v.(map[string]any)
			if !ok {
				if isArrayOfTables(v) {
					p.add(kp, "must be a single table: write [mux], not [[mux]]")
				} else {
					p.add(kp, "expected a table ([mux] section), got %s", kindOf(v))
				}
				continue
			}
			muxPresent = p.decodeStruct(kp, tbl, reflect.ValueOf(&cfg.Mux).Elem(), muxHint)
		case "backend":
			specs = p.decodeBackends(kp, v)
			p.entries = specs
		case "profile":
			profiles = p.decodeProfiles(kp, v)
		case "token":
			tokens = p.decodeTokens(kp, v)
			p.hasTokens = true
		default:
			p.unknownKey(kp, k, []string{"mux", "backend", "profile", "token"}, topHint)
		}
	}
	p.validateMux(&cfg.Mux, muxPresent)
	cfg.Backends, cfg.Warnings = p.validateBackends(specs, &cfg.Mux)
	cfg.Profiles = profiles
	cfg.Warnings = append(cfg.Warnings, p.validateProfiles(profiles, cfg.Backends)...)
	cfg.Tokens = p.validateTokens(tokens, cfg)
	return cfg
}

// decodeTOML parses data into plain maps. The TOML library is not expected
// to panic, but a config file must never crash mux, so a panic is turned
// into an error.
func decodeTOML(data []byte) (top map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			top, err = nil, fmt.Errorf("cannot parse file: %v", r)
		}
	}()
	top = map[string]any{}
	_, err = toml.Decode(string(data), &top)
	return top, err
}

// LooksLikeJSON reports whether data is JSON rather than TOML: a TOML file
// cannot start with "{", every client config does.
func LooksLikeJSON(data []byte) bool {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}

// ShellQuote quotes path for a command line shown to the user, when needed.
func ShellQuote(path string) string {
	if path != "" && regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,\\-]+$`).MatchString(path) {
		return path
	}
	return "'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
}

// lenient turns p's problems into what LoadForServing makes of them: the
// [[backend]] each belongs to is Broken with it (a broken backend whose name
// cannot be its own, being invalid or taken, is named by its place), and
// the others, with the [mux] keys they concern back at their defaults,
// become warnings.
func (p *parser) lenient(cfg *File) {
	if len(p.problems) == 0 {
		return
	}
	cfg.Problems = p.finish()
	byIndex := map[int]int{} // backend[i] → its place in cfg.Backends
	for j, e := range p.entries {
		if m := backendSegRe.FindStringSubmatch(e.path[0]); m != nil {
			if i, err := strconv.Atoi(m[1]); err == nil {
				byIndex[i] = j
			}
		}
	}
	problems := p.problems
	p.problems = nil
	broken := map[int][]problem{}
	var global []problem
	for _, pr := range problems {
		p.breakProfile(cfg, pr)
		if len(pr.path) > 0 {
			if m := backendSegRe.FindStringSubmatch(pr.path[0]); m != nil {
				if i, err := strconv.Atoi(m[1]); err == nil {
					if j, ok := byIndex[i]; ok {
						broken[j] = append(broken[j], pr)
						continue
					}
				}
			}
		}
		global = append(global, pr)
	}
	for j, prs := range broken {
		p.problems = prs
		var lines []string
		for _, pr := range p.finish() {
			lines = append(lines, pr.String())
		}
		b := &cfg.Backends[j]
		b.Broken = strings.Join(lines, "\n")
		switch {
		case b.Name == "":
			b.Renamed = "no name"
		case !backendNameRe.MatchString(b.Name):
			b.Renamed = fmt.Sprintf("%q, an invalid name", b.Name)
		case p.nameTakenBefore(cfg, j):
			b.Renamed = fmt.Sprintf("%q, a duplicate name", b.Name)
		}
		if b.Renamed != "" {
			b.Name = fmt.Sprintf("backend #%d", j+1)
		}
	}
	p.problems = global
	reset := false
	for _, pr := range global {
		if len(pr.path) == 2 && pr.path[0] == "mux" {
			if i, ok := tomlFields(reflect.TypeFor[Settings]())[pr.path[1]]; ok {
				f := reflect.ValueOf(&cfg.Mux).Elem().Field(i)
				f.Set(reflect.Zero(f.Type()))
				reset = true
				if !slices.Contains(cfg.Invalid, pr.path[1]) {
					cfg.Invalid = append(cfg.Invalid, pr.path[1])
				}
			}
		}
	}
	if reset {
		cfg.Mux.FillDefaults()
	}
	cfg.Warnings = append(p.finish(), cfg.Warnings...)
	p.problems = nil
}

// nameTakenBefore reports whether the name of backend j is an earlier
// backend's.
func (p *parser) nameTakenBefore(cfg *File, j int) bool {
	for _, b := range cfg.Backends[:j] {
		if b.Name == cfg.Backends[j].Name {
			return true
		}
	}
	return false
}
