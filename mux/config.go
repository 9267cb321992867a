package mux

// Config loading and validation.
//
// The config file is hand-edited TOML. Every mistake is reported as
// "FILE:LINE: key: what is wrong", and all mistakes are reported at once
// (a *ConfigError), so `mcp-mux check` can list them in one go.
//
// Decoding is done in two steps: the TOML library parses the document into
// plain maps (syntax errors come from there, with a line number), then the
// maps are copied into the Go structs by this file, key by key, so that every
// unknown key and every value of the wrong type is reported, not just the
// first one. The TOML library does not expose the line of each key, so a
// small scanner (scanKeyLines) records the line where each key path is
// defined.
//
// Secrets: the values of env entries are never put in a message (see
// config_secrets.go). Paths: relative ones start at the config file's
// directory (see config_paths.go).

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/mcp-mux/mcp-mux/backends"
)

// Config is the whole config file.
type Config struct {
	Path     string          `toml:"-"`       // the file it was loaded from
	Mux      Settings        `toml:"mux"`     // [mux]
	Backends []backends.Spec `toml:"backend"` // [[backend]], order = precedence
}

// Settings is the [mux] table.
type Settings struct {
	Name             string            `toml:"name"`              // serverInfo name, default "mcp-mux"
	LogLevel         string            `toml:"log_level"`         // debug|info|warn|error, default "info"
	LogFile          string            `toml:"log_file"`          // default "" = stderr
	RequestTimeout   backends.Duration `toml:"request_timeout"`   // default 60s
	StartupTimeout   backends.Duration `toml:"startup_timeout"`   // default 30s
	MaxSubscriptions int               `toml:"max_subscriptions"` // per client session, default 1000
	ToolSeparator    string            `toml:"tool_separator"`    // default "__"
	MaxRequestTime   backends.Duration `toml:"max_request_time"`  // hard cap for progress-extended requests, default 10m
	MaxMessageSize   int               `toml:"max_message_size"`  // bytes, default 16 MiB, >= 1024
	ShutdownGrace    backends.Duration `toml:"shutdown_grace"`    // time to exit after stdin close before SIGTERM, default 2s
	RestartMax       int               `toml:"restart_max"`       // crashes within RestartWindow before "failed", default 5
	RestartWindow    backends.Duration `toml:"restart_window"`    // default 60s
	Instructions     string            `toml:"instructions"`      // default "": the backends' own, merged
}

// Defaults of [mux]; a zero value in the file (or a missing key) means the default.
const (
	DefaultName             = "mcp-mux"
	DefaultLogLevel         = "info"
	DefaultRequestTimeout   = 60 * time.Second
	DefaultStartupTimeout   = 30 * time.Second
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
)

// Problem is one mistake in the config file.
type Problem struct {
	File    string
	Line    int    // 0 if unknown
	Key     string // e.g. "backend[1] (github).env.TOKEN"; may be empty
	Message string
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

// ConfigError lists every problem found in a config file.
type ConfigError struct {
	Problems []Problem
}

// Error returns all problems, one per line.
func (e *ConfigError) Error() string {
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
// *ConfigError listing every problem.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &ConfigError{Problems: []Problem{{File: path, Message: "cannot read config file: " + err.Error()}}}
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse is Load on data already read from path (path is used in messages
// and to fill Config.Path). lookupEnv resolves ${VAR} in env values; nil
// means os.LookupEnv.
func Parse(path string, data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	p := &parser{file: path, dir: absDirOf(path), lookupEnv: lookupEnv}
	cfg := p.parse(data)
	if len(p.problems) > 0 {
		return nil, &ConfigError{Problems: p.finish()}
	}
	return cfg, nil
}

// FindConfig returns the config file to use: flagValue if non-empty, then
// $MCP_MUX_CONFIG, then ./mcp-mux.toml if it exists, then
// $XDG_CONFIG_HOME/mcp-mux/config.toml ($HOME/.config/mcp-mux/config.toml
// when XDG_CONFIG_HOME is unset) if it exists. getenv nil means os.Getenv.
func FindConfig(flagValue string, getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if flagValue != "" {
		return flagValue, nil
	}
	if v := getenv("MCP_MUX_CONFIG"); v != "" {
		return v, nil
	}
	looked := []string{"--config flag (not given)", "$MCP_MUX_CONFIG (not set)"}
	isFile := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir()
	}
	const local = "mcp-mux.toml"
	if isFile(local) {
		return local, nil
	}
	if wd, err := os.Getwd(); err == nil {
		looked = append(looked, filepath.Join(wd, local))
	} else {
		looked = append(looked, "./"+local)
	}
	var user string
	if xdg := getenv("XDG_CONFIG_HOME"); xdg != "" {
		user = filepath.Join(xdg, "mcp-mux", "config.toml")
	} else if home := getenv("HOME"); home != "" {
		user = filepath.Join(home, ".config", "mcp-mux", "config.toml")
	}
	if user != "" {
		if isFile(user) {
			return user, nil
		}
		looked = append(looked, user)
	} else {
		looked = append(looked, "$XDG_CONFIG_HOME/mcp-mux/config.toml (neither XDG_CONFIG_HOME nor HOME is set)")
	}
	return "", fmt.Errorf("no config file found; looked at:\n  %s\n(copy mcp-mux.toml.example to one of these places, or pass the file with --config)",
		strings.Join(looked, "\n  "))
}

// ---------------------------------------------------------------------------
// Decoding

var (
	backendNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	prefixRe      = regexp.MustCompile(`^[A-Za-z0-9_-]*$`)
	bareKeyRe     = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	envVarNameRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	backendSegRe  = regexp.MustCompile(`^backend\[([0-9]+)\]$`)

	durationType        = reflect.TypeOf(backends.Duration{})
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
	timeType            = reflect.TypeOf(time.Time{})
)

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
	lines     map[string]int // key path → line
	problems  []problem
	names     map[int]string // backend index → valid name, for display
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
		k := pr.path
		if len(k) > 0 {
			if m := backendSegRe.FindStringSubmatch(k[0]); m != nil {
				if idx, err := strconv.Atoi(m[1]); err == nil {
					if name, ok := p.names[idx]; ok {
						k = append(keyPath{fmt.Sprintf("%s (%s)", k[0], name)}, k[1:]...)
					}
				}
			}
		}
		out[i] = Problem{File: p.file, Line: pr.line, Key: k.String(), Message: pr.message}
	}
	return out
}

// Limits that keep absurd input (a config file is a few KiB of flat tables)
// from making the TOML parser slow or exhausting the stack.
const (
	maxConfigSize = 1 << 20
	maxNesting    = 32
)

func (p *parser) parse(data []byte) (cfg *Config) {
	if len(data) > maxConfigSize {
		p.addAt(nil, 0, "file is too large (%d bytes, at most %d)", len(data), maxConfigSize)
		return nil
	}
	// The line index is built first: the scanner also rejects deeply
	// nested arrays and inline tables before the TOML parser sees them.
	scan := scanFile(data)
	if scan.tooDeep > 0 {
		p.addAt(nil, scan.tooDeep, "arrays or inline tables nested more than %d deep", maxNesting)
		return nil
	}
	top, err := decodeTOML(data)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			line := pe.Position.Line
			if line == 0 {
				line = pe.Line
			}
			p.addAt(nil, line, "TOML syntax error: %s", syntaxMessage(pe))
		} else {
			p.addAt(nil, 0, "TOML syntax error: the file cannot be parsed")
		}
		return nil
	}
	p.lines = scan.lines
	p.names = map[int]string{}

	cfg = &Config{Path: p.file}
	var muxPresent map[string]bool
	var specs []backendEntry
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
		default:
			p.unknownKey(kp, k, []string{"mux", "backend"}, topHint)
		}
	}
	p.validateMux(&cfg.Mux, muxPresent)
	cfg.Backends = p.validateBackends(specs, &cfg.Mux)
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

func isArrayOfTables(v any) bool {
	switch v := v.(type) {
	case []map[string]any:
		return true
	case []any:
		for _, e := range v {
			if _, ok := e.(map[string]any); !ok {
				return false
			}
		}
		return len(v) > 0
	}
	return false
}

// sortedKeys returns the keys of m in file order (by line, then by name).
func (p *parser) sortedKeys(base keyPath, m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	line := func(k string) int {
		l := p.lines[base.child(k).String()]
		if l == 0 {
			return int(^uint(0) >> 1)
		}
		return l
	}
	sort.Slice(keys, func(i, j int) bool {
		li, lj := line(keys[i]), line(keys[j])
		if li != lj {
			return li < lj
		}
		return keys[i] < keys[j]
	})
	return keys
}

type backendEntry struct {
	path    keyPath // backend[i]
	spec    backends.Spec
	present map[string]bool
}

func (p *parser) decodeBackends(kp keyPath, v any) []backendEntry {
	var elems []any
	switch v := v.(type) {
	case []map[string]any:
		for _, e := range v {
			elems = append(elems, e)
		}
	case []any:
		elems = v
	case map[string]any:
		p.add(kp, "must be an array of tables: write [[backend]] (double brackets) for each backend, not [backend]")
		return nil
	default:
		p.add(kp, "expected [[backend]] sections (an array of tables), got %s", kindOf(v))
		return nil
	}
	var out []backendEntry
	for i, e := range elems {
		bp := kp.index(i)
		tbl, ok := e.(map[string]any)
		if !ok {
			p.add(bp, "expected a table, got %s", kindOf(e))
			continue
		}
		var b backendEntry
		b.path = bp
		p.decodeInheritEnv(bp, tbl)
		b.present = p.decodeStruct(bp, tbl, reflect.ValueOf(&b.spec).Elem(), backendHint)
		if backendNameRe.MatchString(b.spec.Name) {
			p.names[i] = b.spec.Name
		}
		out = append(out, b)
	}
	return out
}

// decodeInheritEnv rewrites inherit_env = true (all of mux's environment)
// as ["*"] and false as absent, and reports a value that is neither a
// boolean nor a list, and list entries that cannot be variable names (names
// only, so they may be shown). Entries of the wrong type are left to
// decodeStruct.
func (p *parser) decodeInheritEnv(bp keyPath, tbl map[string]any) {
	v, ok := tbl["inherit_env"]
	if !ok {
		return
	}
	kp := bp.child("inherit_env")
	switch v := v.(type) {
	case bool:
		if v {
			tbl["inherit_env"] = []any{"*"}
		} else {
			delete(tbl, "inherit_env")
		}
	case []any:
		for i, e := range v {
			if name, ok := e.(string); ok && !backends.ValidInheritPattern(name) {
				p.add(kp.index(i), "invalid variable name %q: use a name, a prefix ending in \"*\" (\"AWS_*\"), or \"*\" for all", name)
			}
		}
	default:
		p.add(kp, `expected true, false or a list of variable names, such as ["GITHUB_TOKEN", "AWS_*"], got %s`, kindOf(v))
		delete(tbl, "inherit_env")
	}
}

// Hints for keys that exist, but in another section.
func topHint(key string) string {
	if _, ok := tomlFields(reflect.TypeOf(Settings{}))[key]; ok {
		return fmt.Sprintf("%q belongs in the [mux] section", key)
	}
	if _, ok := tomlFields(reflect.TypeOf(backends.Spec{}))[key]; ok {
		return fmt.Sprintf("%q belongs in a [[backend]] section (for a table such as env, write [backend.%s] after the [[backend]] header)", key, key)
	}
	return ""
}

func muxHint(key string) string {
	if _, ok := tomlFields(reflect.TypeOf(backends.Spec{}))[key]; ok {
		return fmt.Sprintf("%q is a [[backend]] key, not a [mux] key", key)
	}
	return ""
}

func backendHint(key string) string {
	if _, ok := tomlFields(reflect.TypeOf(Settings{}))[key]; ok {
		return fmt.Sprintf("%q is a [mux] key, not a [[backend]] key", key)
	}
	return ""
}

func (p *parser) unknownKey(kp keyPath, key string, known []string, hint func(string) string) {
	msg := "unknown key"
	if s := closest(key, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else if h := hint(key); h != "" {
		msg += "; " + h
	}
	p.add(kp, "%s", msg)
}

// tomlFields maps the toml tag names of a struct type to field indexes.
func tomlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = i
	}
	return out
}

// fieldNames returns the toml names of t's fields in declaration order.
func fieldNames(t reflect.Type) []string {
	m := tomlFields(t)
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return m[names[i]] < m[names[j]] })
	return names
}

// decodeStruct copies tbl into the struct dst, reporting unknown keys and
// values of the wrong type. It returns the known keys present in tbl, mapped
// to whether their value was valid (invalid ones are reported already and
// should not be checked further).
func (p *parser) decodeStruct(kp keyPath, tbl map[string]any, dst reflect.Value, hint func(string) string) map[string]bool {
	fields := tomlFields(dst.Type())
	present := map[string]bool{}
	for _, k := range p.sortedKeys(kp, tbl) {
		ck := kp.child(k)
		i, ok := fields[k]
		if !ok {
			p.unknownKey(ck, k, fieldNames(dst.Type()), hint)
			continue
		}
		present[k] = p.assign(ck, tbl[k], dst.Field(i))
	}
	return present
}

// assign stores the raw TOML value v into dst, or reports why it cannot.
func (p *parser) assign(kp keyPath, v any, dst reflect.Value) bool {
	t := dst.Type()
	mismatch := func() bool {
		msg := fmt.Sprintf("expected %s, got %s", describe(t), kindOf(v))
		if t.Kind() == reflect.String {
			switch v.(type) {
			case int64, float64, bool:
				msg += " (put the value in double quotes)"
			}
		}
		p.add(kp, "%s", msg)
		return false
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		s, ok := v.(string)
		if !ok {
			return mismatch()
		}
		if err := dst.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			p.add(kp, "%s", err.Error())
			return false
		}
		return true
	}
	switch t.Kind() {
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return mismatch()
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return mismatch()
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(int64)
		if !ok {
			return mismatch()
		}
		if dst.OverflowInt(n) {
			p.add(kp, "number %d is out of range", n)
			return false
		}
		dst.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(int64)
		if !ok {
			return mismatch()
		}
		if n < 0 || dst.OverflowUint(uint64(n)) {
			p.add(kp, "number %d is out of range", n)
			return false
		}
		dst.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		switch f := v.(type) {
		case float64:
			dst.SetFloat(f)
		case int64:
			dst.SetFloat(float64(f))
		default:
			return mismatch()
		}
	case reflect.Pointer:
		nv := reflect.New(t.Elem())
		if !p.assign(kp, v, nv.Elem()) {
			return false
		}
		dst.Set(nv)
	case reflect.Slice:
		rv := reflect.ValueOf(v)
		if v == nil || rv.Kind() != reflect.Slice {
			return mismatch()
		}
		out := reflect.MakeSlice(t, rv.Len(), rv.Len())
		ok := true
		for i := 0; i < rv.Len(); i++ {
			if !p.assign(kp.index(i), rv.Index(i).Interface(), out.Index(i)) {
				ok = false
			}
		}
		dst.Set(out)
		return ok
	case reflect.Map:
		m, isMap := v.(map[string]any)
		if !isMap || t.Key().Kind() != reflect.String {
			return mismatch()
		}
		out := reflect.MakeMapWithSize(t, len(m))
		ok := true
		for _, k := range p.sortedKeys(kp, m) {
			ev := reflect.New(t.Elem()).Elem()
			if !p.assign(kp.child(k), m[k], ev) {
				ok = false
				continue
			}
			out.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
		}
		dst.Set(out)
		return ok
	case reflect.Struct:
		if t == timeType {
			tv, ok := v.(time.Time)
			if !ok {
				return mismatch()
			}
			dst.Set(reflect.ValueOf(tv))
			return true
		}
		m, ok := v.(map[string]any)
		if !ok {
			return mismatch()
		}
		n := len(p.problems)
		p.decodeStruct(kp, m, dst, func(string) string { return "" })
		return len(p.problems) == n
	case reflect.Interface:
		if v != nil && reflect.TypeOf(v).AssignableTo(t) {
			dst.Set(reflect.ValueOf(v))
			return true
		}
		return mismatch()
	default:
		p.add(kp, "cannot be set from the config file")
		return false
	}
	return true
}

// describe says what kind of TOML value a Go type wants.
func describe(t reflect.Type) string {
	if t == durationType {
		return `a duration in double quotes, such as "30s" or "2m"`
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return describe(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return `a list of strings, such as ["a", "b"]`
		}
		return "a list"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return `a table of strings, such as { KEY = "value" }`
		}
		return "a table"
	case reflect.Struct:
		if t == timeType {
			return "a date-time"
		}
		return "a table"
	}
	return "a value"
}

// kindOf names the TOML type of a decoded value (never its content).
func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	case nil:
		return "nothing"
	}
	return "a value of another type"
}

// closest returns the candidate nearest to key if its edit distance is at
// most 2 (and smaller than the key itself), else "".
func closest(key string, candidates []string) string {
	best, bestD := "", 3
	lk := strings.ToLower(key)
	for _, c := range candidates {
		d := editDistance(lk, strings.ToLower(c))
		if d < bestD && d < len(key) {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		if a == b {
			return 0
		}
		return 99
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// ---------------------------------------------------------------------------
// Validation

// fillDefaults gives every key left out (or zero) its default. The mux
// calls it too, so a Config built in code behaves like a loaded one.
func (s *Settings) fillDefaults() {
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
	dur := func(v *backends.Duration, d time.Duration) {
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
	dur(&s.MaxRequestTime, DefaultMaxRequestTime)
	dur(&s.ShutdownGrace, DefaultShutdownGrace)
	dur(&s.RestartWindow, DefaultRestartWindow)
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

	s.fillDefaults()
	if s.MaxRequestTime.Duration < s.RequestTimeout.Duration {
		k := "max_request_time"
		if !present[k] {
			k = "request_timeout"
		}
		p.add(mk(k), "max_request_time (%s) must not be shorter than request_timeout (%s)",
			s.MaxRequestTime.Duration, s.RequestTimeout.Duration)
	}
}

func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xA0:
		return true
	}
	return r > 0xff && strings.TrimSpace(string(r)) == ""
}

func (p *parser) validateBackends(entries []backendEntry, mux *Settings) []backends.Spec {
	type seen struct {
		path keyPath
		line int
	}
	firstByName := map[string]seen{}
	enabled := 0
	out := make([]backends.Spec, 0, len(entries))
	for _, e := range entries {
		s := e.spec
		bp := e.path
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
				where := first.path[0]
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
				exp, issues := expandEnv(val, p.lookupEnv)
				for _, is := range issues {
					if is.unset != "" && s.Disabled {
						continue
					}
					p.addAt(ek, line, "%s", is.message())
				}
				if strings.ContainsRune(exp, 0) {
					p.addAt(ek, line, "value contains a NUL character")
				}
				env[name] = exp
			}
			s.Env = env
		}

		// command and cwd
		switch {
		case !hasCommand:
			p.add(k("command"), "missing: every [[backend]] needs a command")
		case !e.present["command"]: // wrong type, reported already
		case strings.TrimSpace(s.Command) == "":
			p.add(k("command"), "must not be empty")
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
			cwdOK := true
			if s.Cwd != "" {
				if fi, err := os.Stat(s.Cwd); err != nil {
					cwdOK = false
					p.add(k("cwd"), "directory %q%s does not exist", givenCwd, cwdNote)
				} else if !fi.IsDir() {
					cwdOK = false
					p.add(k("cwd"), "%q%s is not a directory", givenCwd, cwdNote)
				}
			}
			if strings.TrimSpace(s.Command) != "" && cwdOK {
				if msg := checkCommand(givenCommand, s.Command, commandBase); msg != "" {
					p.add(k("command"), "%s", msg)
				}
			}
			enabled++
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
	return out
}

// checkCommand reports ("" if fine) whether command, as written in the
// file, can be executed; path is where it was resolved to (see
// resolveCommand) and base what a relative path was taken relative to.
func checkCommand(command, path, base string) string {
	if hasPathSeparator(command) {
		where := ""
		if path != command {
			where = fmt.Sprintf(" (looked at %q)", path)
		}
		var msg string
		fi, err := os.Stat(path)
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
		case runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0:
			msg = fmt.Sprintf("command %q is not executable%s (chmod +x it)", command, where)
		}
		if msg != "" && base != "" {
			msg += ": a relative command path is relative to " + base
		}
		return msg
	}
	if _, err := exec.LookPath(command); err != nil {
		if errors.Is(err, exec.ErrDot) {
			return fmt.Sprintf("command %q is only found through a relative PATH entry; use an absolute path", command)
		}
		return fmt.Sprintf("command %q not found on PATH", command)
	}
	return ""
}

type envIssue struct {
	unset     string // name of an unset variable
	malformed string // description of a syntax error (never contains the value)
}

// expandEnv expands ${VAR} and ${VAR:-default} (default used when VAR is
// unset or empty) and turns $$ into $. Any other $ is kept as is.
func expandEnv(s string, lookup func(string) (string, bool)) (string, []envIssue) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	var issues []envIssue
	for i := 0; i < len(s); {
		c := s[i]
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
			issues = append(issues, envIssue{unset: name})
		}
		b.WriteString(v)
	}
	return b.String(), issues
}

// ---------------------------------------------------------------------------
// Line index

// scanKeyLines returns the line (1-based) where each key path is first
// defined, e.g. "mux" (the [mux] header), "mux.name", "backend[2]" (the
// header of the third [[backend]]), "backend[2].env.TOKEN",
// "backend[0].args[1]". It is meant for files the TOML parser accepted; on
// anything else it does its best and never panics.
func scanKeyLines(data []byte) map[string]int { return scanFile(data).lines }

func scanFile(data []byte) *lineScanner {
	s := &lineScanner{data: data, lines: map[string]int{}, arrays: map[string]int{}}
	for i, c := range data {
		if c == '\n' {
			s.nl = append(s.nl, i)
		}
	}
	if len(data) >= 3 && string(data[:3]) == "\xef\xbb\xbf" {
		s.pos = 3
	}
	s.run()
	return s
}

type lineScanner struct {
	data   []byte
	pos    int
	nl     []int          // offsets of '\n'
	lines  map[string]int // key path → line
	arrays map[string]int // [[array]] path (unindexed last segment) → count so far
	table  keyPath        // current table

	depth   int // nesting of arrays and inline tables
	tooDeep int // line where depth exceeded maxNesting, 0 if never
}

func (s *lineScanner) lineAt(pos int) int { return sort.SearchInts(s.nl, pos) + 1 }

func (s *lineScanner) record(k keyPath, pos int) {
	key := k.String()
	if _, ok := s.lines[key]; !ok {
		s.lines[key] = s.lineAt(pos)
	}
}

func (s *lineScanner) eof() bool { return s.pos >= len(s.data) }

func (s *lineScanner) peek(str string) bool {
	return bytes.HasPrefix(s.data[min(s.pos, len(s.data)):], []byte(str))
}

func (s *lineScanner) skipWS() {
	for !s.eof() && (s.data[s.pos] == ' ' || s.data[s.pos] == '\t') {
		s.pos++
	}
}

// skipSpace skips whitespace, newlines and comments.
func (s *lineScanner) skipSpace() {
	for !s.eof() {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		case '#':
			for !s.eof() && s.data[s.pos] != '\n' {
				s.pos++
			}
		default:
			return
		}
	}
}

func (s *lineScanner) run() {
	for {
		s.skipSpace()
		if s.eof() {
			return
		}
		start := s.pos
		if s.data[s.pos] == '[' {
			s.header()
		} else {
			s.keyValue(s.table)
		}
		// Whatever follows a statement on its line is a comment (or junk).
		for !s.eof() && s.data[s.pos] != '\n' {
			s.pos++
		}
		if s.pos == start {
			s.pos++
		}
	}
}

func (s *lineScanner) header() {
	hpos := s.pos
	array := s.peek("[[")
	if array {
		s.pos += 2
	} else {
		s.pos++
	}
	keys := s.key()
	if len(keys) == 0 {
		return
	}
	var path keyPath
	for i, k := range keys {
		path = path.child(k)
		if i == len(keys)-1 && array {
			key := path.String()
			n := s.arrays[key]
			s.arrays[key] = n + 1
			s.record(path, hpos)
			path = path.index(n)
		} else if n := s.arrays[path.String()]; n > 0 {
			path = path.index(n - 1)
		}
		s.record(path, hpos)
	}
	s.table = path
}

// key reads a dotted key and returns its raw segments.
func (s *lineScanner) key() []string {
	var keys []string
	for {
		s.skipWS()
		if s.eof() {
			return keys
		}
		switch c := s.data[s.pos]; c {
		case '"':
			keys = append(keys, s.basicString())
		case '\'':
			keys = append(keys, s.literalString())
		default:
			start := s.pos
			for !s.eof() && isBareKeyByte(s.data[s.pos]) {
				s.pos++
			}
			if s.pos == start {
				return keys
			}
			keys = append(keys, string(s.data[start:s.pos]))
		}
		s.skipWS()
		if s.eof() || s.data[s.pos] != '.' {
			return keys
		}
		s.pos++
	}
}

func isBareKeyByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func (s *lineScanner) keyValue(base keyPath) {
	kpos := s.pos
	keys := s.key()
	if len(keys) == 0 {
		return
	}
	s.skipWS()
	if s.eof() || s.data[s.pos] != '=' {
		return
	}
	s.pos++
	s.skipWS()
	path := base
	for _, k := range keys {
		path = path.child(k)
		s.record(path, kpos)
	}
	s.value(path)
}

func (s *lineScanner) value(path keyPath) {
	if s.eof() {
		return
	}
	if c := s.data[s.pos]; c == '[' || c == '{' {
		if s.depth >= maxNesting {
			s.tooDeep = s.lineAt(s.pos)
			s.pos = len(s.data) // stop scanning
			return
		}
		s.depth++
		defer func() { s.depth-- }()
	}
	switch s.data[s.pos] {
	case '"':
		if s.peek(`"""`) {
			s.multiline('"', true)
		} else {
			s.basicString()
		}
	case '\'':
		if s.peek(`'''`) {
			s.multiline('\'', false)
		} else {
			s.literalString()
		}
	case '[':
		s.pos++
		for i := 0; ; {
			s.skipSpace()
			if s.eof() {
				return
			}
			switch s.data[s.pos] {
			case ']':
				s.pos++
				return
			case ',':
				s.pos++
				continue
			}
			before := s.pos
			elem := path.index(i)
			s.record(elem, s.pos)
			s.value(elem)
			i++
			if s.pos == before {
				s.pos++
			}
		}
	case '{':
		s.pos++
		for {
			s.skipSpace()
			if s.eof() {
				return
			}
			switch s.data[s.pos] {
			case '}':
				s.pos++
				return
			case ',':
				s.pos++
				continue
			}
			before := s.pos
			s.keyValue(path)
			if s.pos == before {
				s.pos++
			}
		}
	default: // number, boolean, date-time
		for !s.eof() && !strings.ContainsRune(",]}#\r\n", rune(s.data[s.pos])) {
			s.pos++
		}
	}
}

// basicString reads a "..." string (one line) and returns it unescaped.
func (s *lineScanner) basicString() string {
	s.pos++ // opening quote
	start := s.pos
	for !s.eof() && s.data[s.pos] != '"' && s.data[s.pos] != '\n' {
		if s.data[s.pos] == '\\' {
			s.pos++
		}
		s.pos++
	}
	end := min(s.pos, len(s.data))
	if !s.eof() && s.data[s.pos] == '"' {
		s.pos++
	}
	return unescapeTOML(s.data[start:end])
}

// literalString reads a '...' string (one line).
func (s *lineScanner) literalString() string {
	s.pos++
	start := s.pos
	for !s.eof() && s.data[s.pos] != '\'' && s.data[s.pos] != '\n' {
		s.pos++
	}
	str := string(s.data[start:s.pos])
	if !s.eof() && s.data[s.pos] == '\'' {
		s.pos++
	}
	return str
}

// multiline skips a multi-line string (three quotes, " or ').
func (s *lineScanner) multiline(q byte, escapes bool) {
	delim := strings.Repeat(string(q), 3)
	s.pos += 3
	for !s.eof() {
		if escapes && s.data[s.pos] == '\\' {
			s.pos += 2
			continue
		}
		if s.peek(delim) {
			s.pos += 3
			// Up to two more quotes belong to the content.
			for i := 0; i < 2 && !s.eof() && s.data[s.pos] == q; i++ {
				s.pos++
			}
			return
		}
		s.pos++
	}
}

// unescapeTOML decodes the escapes of a TOML basic string.
func unescapeTOML(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	var sb strings.Builder
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' || i+1 >= len(b) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch b[i] {
		case 'b':
			sb.WriteByte('\b')
		case 't':
			sb.WriteByte('\t')
		case 'n':
			sb.WriteByte('\n')
		case 'f':
			sb.WriteByte('\f')
		case 'r':
			sb.WriteByte('\r')
		case 'e':
			sb.WriteByte(0x1b)
		case '"', '\\':
			sb.WriteByte(b[i])
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[b[i]]
			if i+1+n <= len(b) {
				if r, err := strconv.ParseUint(string(b[i+1:i+1+n]), 16, 32); err == nil {
					sb.WriteRune(rune(r))
					i += n
					continue
				}
			}
			sb.WriteByte('\\')
			sb.WriteByte(b[i])
		default:
			sb.WriteByte('\\')
			sb.WriteByte(b[i])
		}
	}
	return sb.String()
}
