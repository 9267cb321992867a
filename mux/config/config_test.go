package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const configDir = "../../testdata/config"

// noEnv is a lookupEnv for an empty environment.
func noEnv(string) (string, bool) { return "", false }

// envOf returns a lookupEnv backed by m.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// parseString parses src as the file "test.toml".
func parseString(t *testing.T, src string, env func(string) (string, bool)) (*File, []Problem) {
	t.Helper()
	cfg, err := Parse("test.toml", []byte(src), env)
	if err == nil {
		if cfg == nil {
			t.Fatal("Parse returned nil config and nil error")
		}
		return cfg, nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse error is %T, want *Error: %v", err, err)
	}
	if cfg != nil {
		t.Errorf("Parse returned a config together with an error")
	}
	if len(ce.Problems) == 0 {
		t.Fatalf("Error without problems")
	}
	return nil, ce.Problems
}

func problemStrings(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("\n\t" + p.String())
	}
	return b.String()
}

type wantProblem struct {
	line int    // 0: no line
	text string // substring of Problem.String() after "FILE:LINE: "
}

// checkProblems asserts that ps are exactly want, in order: same line, and
// the text is a substring of the formatted problem.
func checkProblems(t *testing.T, file string, ps []Problem, want []wantProblem) {
	t.Helper()
	if len(ps) != len(want) {
		t.Fatalf("%s: got %d problems, want %d:%s", file, len(ps), len(want), problemStrings(ps))
	}
	for i, w := range want {
		p := ps[i]
		prefix := filepath.Base(file) + ": "
		if w.line > 0 {
			prefix = fmt.Sprintf("%s:%d: ", filepath.Base(file), w.line)
		}
		s := p.String()
		if filepath.Base(p.File) != filepath.Base(file) || p.Line != w.line {
			t.Errorf("problem %d: got %s:%d, want %s (%q)", i, filepath.Base(p.File), p.Line, prefix, s)
		}
		if !strings.HasPrefix(s, p.File) || !strings.Contains(s, w.text) {
			t.Errorf("problem %d: %q does not contain %q", i, s, w.text)
		}
		if strings.Contains(s, "goroutine") || strings.Contains(s, "panic") {
			t.Errorf("problem %d looks like a crash: %q", i, s)
		}
	}
}

func TestConfigBadFiles(t *testing.T) {
	tests := []struct {
		file string
		want []wantProblem
	}{
		{"bad-syntax.toml", []wantProblem{{6, "TOML syntax error: expected a comma"}}},
		// The library's own positions were the next line's and a column
		// of neither (line 9, column 65 of a 21-character line; column 15
		// of a 12-character one).
		{"unclosed-array.toml", []wantProblem{{9, `TOML syntax error: expected a comma (',') or array terminator (']') (column 1); the "[" opened at line 8, column 8 is not closed`}}},
		{"key-twice.toml", []wantProblem{{6, "TOML syntax error: Key 'backend.args' has already been defined (column 1) (first at line 5)"}}},
		{"unclosed-header.toml", []wantProblem{{4, `TOML syntax error: expected "]]" to end the [[table]] header (column 10)`}}},
		{"unknown-key.toml", []wantProblem{
			{8, "backend #2 (tasks).command: missing"},
			{11, `backend #2 (tasks).comand: unknown key; did you mean "command"?`},
		}},
		{"wrong-type.toml", []wantProblem{{6, "backend #1 (notes).args: expected a list of strings"}}},
		{"duplicate-name.toml", []wantProblem{{9, `backend #2 (notes).name: duplicate backend name "notes" (already used by backend #1 at line 4)`}}},
		{"empty-command.toml", []wantProblem{{5, "backend #1 (notes).command: must not be empty"}}},
		{"bad-duration.toml", []wantProblem{{4, `mux.request_timeout: invalid duration "10"`}}},
		{"unresolved-env.toml", []wantProblem{{8, "backend #1 (github).env.GITHUB_TOKEN: ${GITHUB_TOKEN} is not set: set it in mcp-mux's environment"}}},
		{"command-not-found.toml", []wantProblem{{5, `backend #1 (notes).command: command "mcp-mux-test-no-such-command" not found on PATH`}}},
		{"bad-name.toml", []wantProblem{{4, `backend #1.name: invalid name "my notes"`}}},
		{"bad-override.toml", []wantProblem{
			{14, `backend #1 (notes).override #2.name: invalid tool name "find it"`},
			{17, `backend #1 (notes).override #3.tool: tool "create" is overridden already (override #1, line 8)`},
			{22, `backend #1 (notes).override #4.annotations.readOnlyHint: expected true or false, got a string`},
		}},
		{"multi-problem.toml", multiProblemWant},
		{"tricky-lines.toml", []wantProblem{
			{23, "backend #1 (notes).description: unknown key"},
			{26, "backend #1 (notes).colour: unknown key"},
			{31, "backend #1 (notes).env.SECRET: ${TRICKY_UNSET} is not set"},
			{36, `backend #2 (tasks).restart: must be "on-failure" or "never" (got "sometimes")`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(configDir, tt.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), "#") {
				t.Errorf("%s: should start with a comment saying what is wrong", tt.file)
			}
			cfg, err := Parse(path, data, noEnv)
			if err == nil {
				t.Fatalf("Parse(%s) succeeded: %+v", tt.file, cfg)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is %T, want *Error", err)
			}
			checkProblems(t, path, ce.Problems, tt.want)
			if got := strings.Count(err.Error(), "\n") + 1; got != len(ce.Problems) {
				t.Errorf("Error() has %d lines, want one per problem (%d)", got, len(ce.Problems))
			}
		})
	}
}

var multiProblemWant = []wantProblem{
	{4, `mux.log_level: must be one of debug, info, warn, error (got "verbose")`},
	{5, "mux.max_subscriptions: must not be negative"},
	{6, `mux.tool_separatr: unknown key; did you mean "tool_separator"?`},
	{8, "backend #1.name: missing"},
	{10, `backend #1.restart: must be "on-failure" or "never" (got "always")`},
	{14, `backend #2 (notes).command: command "mcp-mux-test-no-such-command" not found on PATH`},
	{15, `backend #2 (notes).prefix: invalid prefix "no spaces please"`},
	{16, "backend #2 (notes).env.TOKEN: ${MUX_TEST_UNSET_TOKEN} is not set"},
	{19, `backend #3 (notes).name: duplicate backend name "notes" (already used by backend #2 at line 13)`},
	{21, `backend #3 (notes).cwd: directory "/mcp-mux-test/no/such/dir" does not exist`},
	{22, "backend #3 (notes).disabled: expected true or false, got a string"},
}

func TestConfigMultiProblem(t *testing.T) {
	// Load (not Parse): the real environment, real file name in messages.
	t.Setenv("MUX_TEST_UNSET_TOKEN", "")
	os.Unsetenv("MUX_TEST_UNSET_TOKEN")
	path := filepath.Join(configDir, "multi-problem.toml")
	_, err := Load(path)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Load: got %v, want *Error", err)
	}
	checkProblems(t, path, ce.Problems, multiProblemWant)
	for _, p := range ce.Problems {
		if p.File != path {
			t.Errorf("problem file %q, want %q", p.File, path)
		}
	}
}

func TestConfigGood(t *testing.T) {
	path := filepath.Join(configDir, "good.toml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(path, data, noEnv)
	if err != nil {
		t.Fatalf("Parse(good.toml): %v", err)
	}
	if cfg.Path != path {
		t.Errorf("Path = %q, want %q", cfg.Path, path)
	}
	wantMux := Settings{
		Name:             "test-mux",
		LogLevel:         "debug",
		LogFile:          "",
		RequestTimeout:   Duration{Duration: 60 * time.Second},
		StartupTimeout:   Duration{Duration: 120 * time.Second},
		FirstListWait:    Duration{Duration: 3 * time.Second},
		MaxSubscriptions: 1000,
		ToolSeparator:    "__",
		MaxRequestTime:   Duration{Duration: 10 * time.Minute},
		MaxMessageSize:   16777216,
		ShutdownGrace:    Duration{Duration: 2 * time.Second},
		RestartMax:       5,
		RestartWindow:    Duration{Duration: 60 * time.Second},
		HTTPSessionIdle:  Duration{Duration: 30 * time.Minute},
		DrainTimeout:     Duration{Duration: 25 * time.Second},
		ToolList:         ToolListAuto,
		ToolListMax:      64,
	}
	if cfg.Mux != wantMux {
		t.Errorf("Mux =\n%+v\nwant\n%+v", cfg.Mux, wantMux)
	}
	if len(cfg.Backends) != 2 {
		t.Fatalf("got %d backends, want 2", len(cfg.Backends))
	}
	notes, tasks := cfg.Backends[0], cfg.Backends[1]
	if notes.Name != "notes" || notes.Command != "go" || notes.Restart != "on-failure" ||
		notes.Prefix != nil || notes.EffectivePrefix() != "notes" || notes.Disabled ||
		!reflect.DeepEqual(notes.Args, []string{"run", "./testdata/fixture", "-name", "notes"}) {
		t.Errorf("backend[0] = %+v", notes)
	}
	if tasks.Name != "tasks" || tasks.Restart != "never" || tasks.EffectivePrefix() != "t" ||
		tasks.RequestTimeout.Duration != 5*time.Second ||
		!reflect.DeepEqual(tasks.Args, []string{"run", "./testdata/fixture", "-name", "tasks"}) ||
		!reflect.DeepEqual(tasks.Env, map[string]string{"TASKS_MODE": "fast"}) {
		t.Errorf("backend[1] = %+v", tasks)
	}

	// The same file through Load, with the variable set.
	t.Setenv("TASKS_MODE", "slow")
	cfg, err = Load(path)
	if err != nil {
		t.Fatalf("Load(good.toml): %v", err)
	}
	if got := cfg.Backends[1].Env["TASKS_MODE"]; got != "slow" {
		t.Errorf("TASKS_MODE = %q, want slow", got)
	}
}

func TestConfigExample(t *testing.T) {
	const path = "../../mcp-mux.toml.example"
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s):\n%v", path, err)
	}
	if len(cfg.Backends) != 2 || cfg.Backends[0].Command != "go" || cfg.Backends[1].Command != "go" {
		t.Errorf("example should have two `go` backends, got %+v", cfg.Backends)
	}
	if cfg.Mux.StartupTimeout.Duration != 120*time.Second {
		t.Errorf("startup_timeout = %s, want 120s", cfg.Mux.StartupTimeout)
	}
	// Each backend's `go run` gets the Go environment of the `go run .`
	// that started mcp-mux, its build cache above all (found through
	// XDG_CACHE_HOME or HOME when GOCACHE is not set): without it a
	// backend compiled the fixture and its dependencies again, 70 s on a
	// fresh machine, where the cache already had them.
	for _, b := range cfg.Backends {
		for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOENV", "GOTOOLCHAIN", "GOPROXY", "CGO_ENABLED", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"} {
			if !slices.ContainsFunc(b.InheritEnv, func(p string) bool {
				return p == v || strings.HasSuffix(p, "*") && strings.HasPrefix(v, strings.TrimSuffix(p, "*"))
			}) {
				t.Errorf("example backend %s: inherit_env %q does not pass %s on to its go run", b.Name, b.InheritEnv, v)
			}
		}
	}
	// Every key is documented in the example.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []reflect.Type{reflect.TypeOf(Settings{}), reflect.TypeOf(Backend{}), reflect.TypeOf(Token{})} {
		for _, key := range fieldNames(typ) {
			if !strings.Contains(string(data), "\n"+key+" = ") && !strings.Contains(string(data), "# "+key+" = ") {
				t.Errorf("example does not show key %q of %s", key, typ)
			}
		}
	}
}

func TestConfigEnvExpansion(t *testing.T) {
	env := envOf(map[string]string{"SET": "value", "EMPTY": "", "OTHER": "x"})
	tests := []struct {
		in, want string
		problem  string // substring of the single issue, "" = none
	}{
		{"plain", "plain", ""},
		{"${SET}", "value", ""},
		{"a-${SET}-b", "a-value-b", ""},
		{"${SET}${OTHER}", "valuex", ""},
		{"${UNSET:-fallback}", "fallback", ""},
		{"${EMPTY:-fallback}", "fallback", ""},
		{"${SET:-fallback}", "value", ""},
		{"${UNSET:-}", "", ""},
		{"${EMPTY}", "", ""},
		{"$$", "$", ""},
		{"$${SET}", "${SET}", ""},
		{"price: 5$", "price: 5$", ""},
		{"$HOME", "$HOME", ""},
		{"a$b", "a$b", ""},
		{"${UNSET}", "", "${UNSET} is not set (use ${UNSET:-default} for a default)"},
		{"${", "", `"${" without a closing "}"`},
		{"abc${SET", "abc", `"${" without a closing "}"`},
		{"${}", "", `empty "${}"`},
		{"${1BAD}", "", `invalid "${...}"`},
		{"${SET-x}", "", `invalid "${...}"`},
	}
	for _, tt := range tests {
		got, issues := expandEnv(tt.in, env)
		if tt.problem == "" {
			if len(issues) != 0 || got != tt.want {
				t.Errorf("expandEnv(%q) = %q, %v; want %q, no issues", tt.in, got, issues, tt.want)
			}
			continue
		}
		if len(issues) != 1 {
			t.Errorf("expandEnv(%q): got issues %v, want one", tt.in, issues)
			continue
		}
		msg := issues[0].malformed
		if issues[0].unset != "" {
			msg = fmt.Sprintf("${%s} is not set (use ${%s:-default} for a default)", issues[0].unset, issues[0].unset)
		}
		if !strings.Contains(msg, tt.problem) {
			t.Errorf("expandEnv(%q): issue %q, want %q", tt.in, msg, tt.problem)
		}
	}

	// Through Parse: expanded values land in Spec.Env, problems name the key.
	src := `
[[backend]]
name = "b"
command = "go"
[backend.env]
A = "${SET}"
B = "${UNSET:-dflt}"
C = "$$5"
D = "${NOPE}"
E = "${oops"
`
	_, ps := parseString(t, src, env)
	checkProblems(t, "test.toml", ps, []wantProblem{
		{9, "backend #1 (b).env.D: ${NOPE} is not set"},
		{10, `backend #1 (b).env.E: "${" without a closing "}"`},
	})
	cfg, ps := parseString(t, strings.Replace(strings.Replace(src, "${NOPE}", "x", 1), "${oops", "y", 1), env)
	if ps != nil {
		t.Fatalf("unexpected problems:%s", problemStrings(ps))
	}
	want := map[string]string{"A": "value", "B": "dflt", "C": "$5", "D": "x", "E": "y"}
	if !reflect.DeepEqual(cfg.Backends[0].Env, want) {
		t.Errorf("Env = %v, want %v", cfg.Backends[0].Env, want)
	}

	// A disabled backend may reference unset variables, but not malformed ones.
	_, ps = parseString(t, `
[[backend]]
name = "on"
command = "go"
[[backend]]
name = "off"
command = "go"
disabled = true
env = { T = "${NOPE}", U = "${" }
`, env)
	checkProblems(t, "test.toml", ps, []wantProblem{{9, `backend #2 (off).env.U: "${" without a closing "}"`}})
}

func TestConfigSecretsNeverInErrors(t *testing.T) {
	const secret = "hunter2-SECRET-value"
	env := envOf(map[string]string{"TOKEN": secret})
	srcs := []string{
		// every env entry broken in some way, next to the secret
		`[[backend]]
name = "gh"
command = "mcp-mux-test-no-such-command"
prefix = "bad prefix"
[backend.env]
OK = "` + secret + `"
FROM_ENV = "${TOKEN}"
UNSET = "` + secret + `${NOT_SET_ANYWHERE}"
MALFORMED = "` + secret + `${"
BADNAME = "${` + secret + `}"
BADNAME2 = "${X:` + secret + `}"
NUMBER = 12345
"BAD=NAME" = "` + secret + `"
NUL = "` + secret + `\u0000"
`,
		// a type error in env
		`[[backend]]
name = "gh"
command = "go"
env = "TOKEN=` + secret + `"
`,
		// env values in an unknown table and at top level
		`envs = { TOKEN = "` + secret + `" }
[[backend]]
name = "gh"
command = "go"
enb = { TOKEN = "` + secret + `" }
`,
		// a syntax error after the secret
		`[[backend]]
name = "gh"
command = "go"
env = { TOKEN = "` + secret + `" }
oops oops
`,
		// a syntax error inside the value
		`[[backend]]
name = "gh"
command = "go"
env = { TOKEN = "` + secret + `\q" }
`,
	}
	for i, src := range srcs {
		_, err := Parse("test.toml", []byte(src), env)
		if err == nil {
			t.Errorf("case %d: no error", i)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("case %d: error reveals the secret:\n%v", i, err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(exe)
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := "[[backend]]\nname = \"ok\"\ncommand = \"go\"\n"

	tests := []struct {
		name string
		src  string
		want []wantProblem
	}{
		{"empty file", "", []wantProblem{{0, "no enabled [[backend]]: add at least one"}}},
		{"all disabled", "[[backend]]\nname = \"a\"\ncommand = \"x-not-installed\"\ndisabled = true\n",
			[]wantProblem{{0, "no enabled [[backend]] (all 1 are disabled)"}}},
		{"disabled: command not checked, name still checked",
			ok + "[[backend]]\nname = \"bad name\"\ncommand = \"x-not-installed\"\ncwd = \"/no/such/dir\"\ndisabled = true\n",
			[]wantProblem{{5, `backend #2.name: invalid name "bad name"`}}},
		{"disabled: command still required", ok + "[[backend]]\nname = \"off\"\ndisabled = true\n",
			[]wantProblem{{4, "backend #2 (off).command: missing"}}},
		{"single [backend] table", "[backend]\nname = \"a\"\ncommand = \"go\"\n", []wantProblem{
			{1, "backend: must be an array of tables: write [[backend]] (double brackets)"},
			{0, "no enabled [[backend]]"},
		}},
		{"[[mux]]", ok + "[[mux]]\nname = \"x\"\n", []wantProblem{{4, "mux: must be a single table: write [mux], not [[mux]]"}}},
		{"backend is a string", "backend = \"go\"\n", []wantProblem{
			{1, "backend: expected [[backend]] sections (an array of tables), got a string"},
			{0, "no enabled [[backend]]"},
		}},
		{"top-level keys", "log_level = \"info\"\nbackends = 1\ncommand = \"go\"\nfoo = 1\n" + ok, []wantProblem{
			{1, `log_level: unknown key; "log_level" belongs in the [mux] section`},
			{2, `backends: unknown key; did you mean "backend"?`},
			{3, `command: unknown key; "command" belongs in a [[backend]] section`},
			{4, "foo: unknown key"},
		}},
		{"mux key in backend", ok + "log_level = \"debug\"\n", []wantProblem{{4, `backend #1 (ok).log_level: unknown key; "log_level" is a [mux] key`}}},
		{"backend key in mux", "[mux]\ncwd = \"/\"\n" + ok, []wantProblem{{2, `mux.cwd: unknown key; "cwd" is a [[backend]] key`}}},
		{"many type errors at once", "[mux]\nname = 5\nlog_level = true\nmax_subscriptions = \"10\"\nrequest_timeout = 30\nmax_message_size = 1.5\n" +
			"[[backend]]\nname = \"b\"\ncommand = [\"go\"]\nargs = [\"run\", 3]\nenv = { PORT = 8080 }\nprefix = 1\ndisabled = \"yes\"\npoll_interval = \"soon\"\n", []wantProblem{
			{2, "mux.name: expected a string, got an integer (put the value in double quotes)"},
			{3, "mux.log_level: expected a string, got a boolean"},
			{4, "mux.max_subscriptions: expected an integer, got a string"},
			{5, `mux.request_timeout: expected a duration in double quotes, such as "30s" or "2m", got an integer`},
			{6, "mux.max_message_size: expected an integer, got a float"},
			{9, "backend #1 (b).command: expected a string, got an array"},
			{10, "backend #1 (b).args #2: expected a string, got an integer"},
			{11, "backend #1 (b).env.PORT: expected a string, got an integer (put the value in double quotes)"},
			{12, "backend #1 (b).prefix: expected a string, got an integer"},
			{13, "backend #1 (b).disabled: expected true or false, got a string"},
			{14, `backend #1 (b).poll_interval: invalid duration "soon"`},
		}},
		{"negative duration", ok + "restart = \"never\"\npoll_interval = \"-5s\"\n", []wantProblem{{5, "must not be negative"}}},
		{"mux numbers", "[mux]\nmax_message_size = 100\nrestart_max = -2\nmax_subscriptions = -1\n" + ok, []wantProblem{
			{2, "mux.max_message_size: must be at least 1024 bytes (got 100)"},
			{3, "mux.restart_max: must not be negative (got -2)"},
			{4, "mux.max_subscriptions: must not be negative (got -1)"},
		}},
		{"log_level warning", "[mux]\nlog_level = \"warning\"\n" + ok, []wantProblem{{2, `did you mean "warn"?`}}},
		{"log_file dir", "[mux]\nlog_file = \"/no/such/dir/mux.log\"\n" + ok, []wantProblem{{2, `mux.log_file: directory "/no/such/dir" does not exist`}}},
		{"separator", "[mux]\ntool_separator = \"\"\nname = \" \"\n" + ok, []wantProblem{
			{2, "mux.tool_separator: must not be empty"},
			{3, "mux.name: must not be empty"},
		}},
		{"separator whitespace", "[mux]\ntool_separator = \"_ \"\n" + ok, []wantProblem{{2, "must not contain whitespace"}}},
		{"max_request_time shorter", "[mux]\nrequest_timeout = \"2m\"\nmax_request_time = \"1m\"\n" + ok, []wantProblem{
			{3, "max_request_time (1m0s) must not be shorter than request_timeout (2m0s)"},
		}},
		{"prefix contains separator", "[[backend]]\nname = \"a__b\"\ncommand = \"go\"\n[[backend]]\nname = \"c\"\ncommand = \"go\"\nprefix = \"x__\"\n", []wantProblem{
			{2, `backend #1 (a__b).name: tool prefix "a__b" contains the tool separator "__"`},
			{7, `backend #2 (c).prefix: tool prefix "x__" contains the tool separator`},
		}},
		{"empty prefix is fine", ok + "prefix = \"\"\n", nil},
		{"missing name and command", "[[backend]]\nargs = []\n", []wantProblem{
			{1, "backend #1.name: missing: every [[backend]] needs a name"},
			{1, "backend #1.command: missing: every [[backend]] needs a command"},
		}},
		{"blank command", "[[backend]]\nname = \"a\"\ncommand = \"  \"\n", []wantProblem{{3, "backend #1 (a).command: must not be empty"}}},
		{"command path ok", "[[backend]]\nname = \"a\"\ncommand = \"" + exe + "\"\n", nil},
		{"command relative to cwd", "[[backend]]\nname = \"a\"\ncommand = \"./server\"\ncwd = \"" + dir + "\"\n", nil},
		{"command relative, missing", "[[backend]]\nname = \"a\"\ncommand = \"./server\"\ncwd = \"/\"\n", []wantProblem{
			{3, `backend #1 (a).command: command "./server" not found (looked at "/server")`},
		}},
		{"command not executable", "[[backend]]\nname = \"a\"\ncommand = \"" + noexec + "\"\n", []wantProblem{{3, "is not executable"}}},
		{"command is a directory", "[[backend]]\nname = \"a\"\ncommand = \"" + dir + "/\"\n", []wantProblem{{3, "is a directory"}}},
		{"cwd is a file", "[[backend]]\nname = \"a\"\ncommand = \"go\"\ncwd = '" + exe + "'\n", []wantProblem{{4, "is not a directory"}}},
		{"inline array of tables", "backend = [\n  { name = \"a\", command = \"go\" },\n  { name = \"a\", command = \"go\", restart = \"x\" },\n]\n", []wantProblem{
			{3, `backend #2 (a).name: duplicate backend name "a" (already used by backend #1 at line 2)`},
			{3, `backend #2 (a).restart: must be`},
		}},
		{"bad backend element", "backend = [1]\n", []wantProblem{
			{1, "backend #1: expected a table, got an integer"},
			{0, "no enabled [[backend]]"},
		}},
		{"dotted keys", "mux.log_level = \"loud\"\n" + ok + "env.A.B = \"x\"\n", []wantProblem{
			{1, "mux.log_level: must be one of"},
			{5, "backend #1 (ok).env.A: expected a string, got a table"},
		}},
		{"quoted keys", ok + "\"env\" = { \"A.B\" = \"${NOPE}\" }\n", []wantProblem{{4, `backend #1 (ok).env."A.B": ${NOPE} is not set`}}},
		{"nesting too deep", ok + "args = " + strings.Repeat("[", 40) + "\n", []wantProblem{{4, "nested more than 32 deep"}}},
		{"nesting too deep, inline tables", "x = 1\n\na = " + strings.Repeat("{b=", 40) + strings.Repeat("}", 40) + "\n", []wantProblem{{3, "nested more than 32 deep"}}},
		{"missing ] is a syntax error, not deep nesting", "[[backend]]\nname = \"a\"\nargs = [\"x\"\ncommand = \"go\"\n" + strings.Repeat("[[backend]]\nname = \"b\"\n", 40), []wantProblem{{4, "TOML syntax error"}}},
		{"too large", ok + "# " + strings.Repeat("x", 1<<20) + "\n", []wantProblem{{0, "file is too large"}}},
		{"duplicate key is a syntax error", ok + "name = \"x\"\n", []wantProblem{{4, "TOML syntax error"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if runtime.GOOS == "windows" && strings.Contains(tt.name, "command") {
				t.Skip("unix paths")
			}
			_, ps := parseString(t, tt.src, noEnv)
			checkProblems(t, "test.toml", ps, tt.want)
		})
	}
}

func TestConfigKeyLines(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(configDir, "tricky-lines.toml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := scanKeyLines(data)
	want := map[string]int{
		"mux":                                5,
		"mux.name":                           6,
		"mux.log_file":                       7,
		"backend":                            9,
		"backend[0]":                         9,
		"backend[0].name":                    10,
		"backend[0].args":                    12,
		"backend[0].args[0]":                 13,
		"backend[0].args[2]":                 15,
		"backend[0].args[3]":                 19,
		"backend[0].description":             23,
		"backend[0].colour":                  26,
		"backend[0].env":                     28,
		`backend[0].env."single.quoted"`:     29,
		`backend[0].env."double \"quoted\""`: 30,
		"backend[0].env.SECRET":              31,
		"backend[1]":                         33,
		"backend[1].restart":                 36,
	}
	for k, w := range want {
		if got := lines[k]; got != w {
			t.Errorf("line of %s = %d, want %d", k, got, w)
		}
	}
	for k := range lines {
		if strings.Contains(k, "fake") || strings.Contains(k, "also") || k == "backend[2]" {
			t.Errorf("key %q found inside a multi-line string", k)
		}
	}
}

func TestConfigProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "f.toml", Line: 3, Key: "mux.name", Message: "bad"}, "f.toml:3: mux.name: bad"},
		{Problem{File: "f.toml", Line: 0, Key: "mux.name", Message: "bad"}, "f.toml: mux.name: bad"},
		{Problem{File: "f.toml", Line: 7, Message: "bad"}, "f.toml:7: bad"},
		{Problem{File: "f.toml", Message: "bad"}, "f.toml: bad"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	e := &Error{Problems: []Problem{tests[0].p, tests[3].p}}
	if got, want := e.Error(), "f.toml:3: mux.name: bad\nf.toml: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestConfigLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.toml")
	_, err := Load(path)
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("Load: %v, want one problem", err)
	}
	if got := ce.Problems[0].String(); !strings.HasPrefix(got, path+": cannot read config file: ") || strings.Count(got, path) != 1 {
		t.Errorf("problem = %q", got)
	}
}

func TestFindConfig(t *testing.T) {
	// The XDG layout, on every OS the test runs on (the others:
	// TestFindConfigLooksInEveryPlaceOfTheOS).
	dir := t.TempDir()
	t.Chdir(dir)
	xdg := filepath.Join(dir, "xdg")
	home := filepath.Join(dir, "home")
	xdgFile := filepath.Join(xdg, "mcp-mux", "config.toml")
	homeFile := filepath.Join(home, ".config", "mcp-mux", "config.toml")
	write := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	find := func(flag string) string {
		t.Helper()
		p, err := findFor(flag, "linux", getenv)
		if err != nil {
			t.Fatalf("Find(%q): %v", flag, err)
		}
		return p
	}

	// Nothing anywhere: the error lists every place.
	env["HOME"] = home
	_, err := findFor("", "linux", getenv)
	if err == nil {
		t.Fatal("Find found something in an empty dir")
	}
	for _, s := range []string{"--config", "MCP_MUX_CONFIG", filepath.Join(dir, "mcp-mux.toml"), homeFile} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not mention %q:\n%v", s, err)
		}
	}
	env["XDG_CONFIG_HOME"] = xdg
	if _, err := findFor("", "linux", getenv); err == nil || !strings.Contains(err.Error(), xdgFile) {
		t.Errorf("error should mention %s: %v", xdgFile, err)
	}

	// $HOME/.config when XDG_CONFIG_HOME is unset.
	delete(env, "XDG_CONFIG_HOME")
	write(homeFile)
	if got := find(""); got != homeFile {
		t.Errorf("got %q, want %q", got, homeFile)
	}
	// XDG_CONFIG_HOME when set (and the file exists), ignoring $HOME.
	env["XDG_CONFIG_HOME"] = xdg
	if _, err := findFor("", "linux", getenv); err == nil {
		t.Errorf("with XDG_CONFIG_HOME set, $HOME/.config should not be used")
	}
	write(xdgFile)
	if got := find(""); got != xdgFile {
		t.Errorf("got %q, want %q", got, xdgFile)
	}
	// ./mcp-mux.toml before the user config.
	write(filepath.Join(dir, "mcp-mux.toml"))
	if got := find(""); got != "mcp-mux.toml" {
		t.Errorf("got %q, want mcp-mux.toml", got)
	}
	// $MCP_MUX_CONFIG before ./mcp-mux.toml, even if it does not exist.
	env["MCP_MUX_CONFIG"] = "/from/env.toml"
	if got := find(""); got != "/from/env.toml" {
		t.Errorf("got %q, want /from/env.toml", got)
	}
	// The flag before everything.
	if got := find("flag.toml"); got != "flag.toml" {
		t.Errorf("got %q, want flag.toml", got)
	}
}

// leaksSecret reports whether out contains secret or any 7-byte piece of it.
func leaksSecret(out, secret string) bool {
	if len(secret) < 7 {
		return strings.Contains(out, secret)
	}
	for i := 0; i+7 <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+7]) {
			return true
		}
	}
	return false
}

// envSecretCases are env entries broken in ways whose error used to quote
// the value: the TOML library's syntax errors, an unset "variable" that is
// really a token, a NAME=value key. Each still needs its line and a word on
// what is wrong.
var envSecretCases = []struct {
	name, entry, secret, want string
}{
	{"\\u with two digits", `API_TOKEN = "S3CR3Tq7Zx\u00"`, "S3CR3Tq7Zx", "invalid escape sequence"},
	{"\\x with one digit", `API_TOKEN = "xS3CR3Tw8Yv\x4"`, "xS3CR3Tw8Yv", "invalid escape sequence"},
	{"\\U with four digits", `API_TOKEN = "US3CR3Tp6Xu\U0000"`, "US3CR3Tp6Xu", "invalid escape sequence"},
	{"\\u with letters", `API_TOKEN = "uS3CR3Tn5Wt\uZZZZ"`, "uS3CR3Tn5Wt", "invalid escape sequence"},
	{"\\q", `API_TOKEN = "qS3CR3Tm4Vs\q"`, "qS3CR3Tm4Vs", "invalid escape sequence"},
	{"unquoted number with a leading zero", `PIN = 0738491625`, "0738491625", "leading zero"},
	{"unquoted number with underscores", `PIN = 73_84__91625`, "73_84__91625", "underscores"},
	{"unquoted word", `API_TOKEN = tokQ7xZsecretW`, "tokQ7xZsecretW", "expected a value"},
	{"unquoted float", `API_TOKEN = 3.9418275e`, "3.9418275e", "float"},
	{"text after the string", `API_TOKEN = "pre" S3CR3Tk2Tr`, "S3CR3Tk2Tr", "TOML syntax error"},
	{"token written as ${...}", `GITHUB_TOKEN = "${ghp_16C7e42F292c6912E7710c838347Ae178B4a}"`, "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "not set"},
	{"NAME=value as the key", `"API_TOKEN=S3CR3Tj1Sq" = ""`, "S3CR3Tj1Sq", "invalid environment variable name"},
	{"NAME=value as the key, with an unset variable", `"API_TOKEN=S3CR3Th0Rp" = "${NOPE}"`, "S3CR3Th0Rp", "NOPE"},
}

// TestErrorNeverShowsAnEnvValue: whatever is wrong in an env entry,
// the problem names the file, the line and what is wrong, but not the value.
func TestErrorNeverShowsAnEnvValue(t *testing.T) {
	for _, inline := range []bool{true, false} {
		for _, c := range envSecretCases {
			t.Run(fmt.Sprintf("%s/inline=%v", c.name, inline), func(t *testing.T) {
				src := "[[backend]]\nname = \"api\"\ncommand = \"go\"\n[backend.env]\n" + c.entry + "\n"
				line := 5
				if inline {
					src = "[[backend]]\nname = \"api\"\ncommand = \"go\"\nenv = { " + c.entry + " }\n"
					line = 4
				}
				_, err := Parse("test.toml", []byte(src), noEnv)
				if err == nil {
					t.Fatal("no error")
				}
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("error is %T", err)
				}
				if leaksSecret(err.Error(), c.secret) {
					t.Errorf("the error shows the value:\n%v", err)
				}
				if ce.Problems[0].Line != line || !strings.Contains(err.Error(), c.want) {
					t.Errorf("want line %d and %q in:\n%v", line, c.want, err)
				}
			})
		}
	}
}

// TestConfigSyntaxErrorsStillSayWhereAndWhat: syntax errors outside env
// are still reported with their line, a column and what is wrong.
func TestConfigSyntaxErrorsStillSayWhereAndWhat(t *testing.T) {
	tests := []struct{ src, want string }{
		{"[[backend]]\nname = \"a\"\nargs = [\"run\" \"x\"]\n", `TOML syntax error: expected a comma (',') or array terminator (']') (column 15)`},
		{"[[backend]]\nname = \"a\"\ncommand = go\n", "TOML syntax error: expected a value"},
		{"[[backend]]\nname = \"a\"\ncommand = \"C:\\Users\\me\\server.exe\"\n", `TOML syntax error: invalid escape sequence in a string (column 12): \U must be followed by eight hexadecimal digits`},
		{"[[backend]]\nname = \"a\"\nname = \"b\"\n", "TOML syntax error: Key 'backend.name' has already been defined (column"},
		{"[[backend]\nname = \"a\"\n", "TOML syntax error: expected \"]]\" to end the [[table]] header"},
		{"[mux]\nrequest_timeout = 007\n", "TOML syntax error: invalid integer (column 19): cannot have leading zeroes"},
	}
	for _, tt := range tests {
		_, ps := parseString(t, tt.src, noEnv)
		if len(ps) != 1 || ps[0].Line == 0 || !strings.Contains(ps[0].String(), tt.want) {
			t.Errorf("%q: want one problem with a line containing %q, got:%s", tt.src, tt.want, problemStrings(ps))
		}
	}
}

func TestConfigSecretFixtureFile(t *testing.T) {
	path := filepath.Join(configDir, "secret-bad-escape.toml")
	_, err := Load(path)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Load: %v, want a *Error", err)
	}
	checkProblems(t, path, ce.Problems, []wantProblem{{7, "TOML syntax error: invalid escape sequence in a string (column"}})
	if leaksSecret(err.Error(), "S3CR3Tq7Zx") {
		t.Errorf("the error shows the value:\n%v", err)
	}
}

// TestConfigUnsetVariableNames: a conventional variable name is named, so
// that the user knows what to export; one that looks like a token is not.
func TestConfigUnsetVariableNames(t *testing.T) {
	for name, shown := range map[string]bool{
		"GITHUB_TOKEN": true, "http_proxy": true, "API_KEY_V2": true, "_X": true,
		"ghp_16C7e42F292c6912E7710c838347Ae178B4a": false, "a3f29c0d81b7e4f6": false, "AbCdEfGhIjKl": false,
	} {
		_, ps := parseString(t, "[[backend]]\nname = \"a\"\ncommand = \"go\"\nenv = { X = \"${"+name+"}\" }\n", noEnv)
		s := problemStrings(ps)
		if len(ps) != 1 || ps[0].Line != 4 || !strings.Contains(s, "not set") {
			t.Errorf("%s: want one problem on line 4 saying it is not set:%s", name, s)
		}
		if strings.Contains(s, name) != shown {
			t.Errorf("%s: name shown = %v, want %v:%s", name, !shown, shown, s)
		}
	}
}

// TestConfigLogFileThatIsStdoutIsAProblem: logs on stdout would corrupt
// the protocol; check says so for every name of stdout it can recognise.
func TestConfigLogFileThatIsStdoutIsAProblem(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no /dev/stdout on Windows (TestConfigWindowsPaths: it is a path there)")
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "out.log")
	if err := os.Symlink("/dev/stdout", link); err != nil {
		t.Fatal(err)
	}
	link2 := filepath.Join(dir, "chain.log")
	if err := os.Symlink("out.log", link2); err != nil {
		t.Fatal(err)
	}
	fdLink := filepath.Join(dir, "fd.log")
	if err := os.Symlink("/dev/fd/1", fdLink); err != nil {
		t.Fatal(err)
	}
	ok := "[[backend]]\nname = \"ok\"\ncommand = \"go\"\n"
	for _, lf := range []string{"/dev/stdout", "/proc/self/fd/1", "/dev/fd/1", "/dev/fd/../fd/1", link, link2, fdLink, "out.log"} {
		path := filepath.Join(dir, "mcp-mux.toml")
		_, err := Parse(path, []byte("[mux]\nlog_file = "+strconv.Quote(lf)+"\n"+ok), noEnv)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("log_file %q: no problem reported", lf)
			continue
		}
		checkProblems(t, path, ce.Problems, []wantProblem{{2, "mux.log_file: " + strconv.Quote(lf)}})
		if !strings.Contains(err.Error(), "stdout") {
			t.Errorf("log_file %q: the problem does not say it is stdout: %v", lf, err)
		}
	}
	// A regular file next to the config is fine.
	if _, err := Parse(filepath.Join(dir, "mcp-mux.toml"), []byte("[mux]\nlog_file = \"mux.log\"\n"+ok), noEnv); err != nil {
		t.Errorf("log_file mux.log: %v", err)
	}
}

// TestConfigRelativePathsAreRelativeToTheConfigFile: log_file, cwd and a
// command with a "/" are taken relative to the config file's directory
// (a command relative to cwd when cwd is set), and the messages say so.
func TestConfigRelativePathsAreRelativeToTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"logs", "data", "bin", "data/bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, exe := range []string{"bin/server", "data/bin/server"} {
		if runtime.GOOS == "windows" {
			exe += ".exe" // found as bin/server there, as exec finds it
		}
		if err := os.WriteFile(filepath.Join(dir, exe), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(t.TempDir()) // somewhere else: nothing may be found through the working directory
	path := filepath.Join(dir, "mcp-mux.toml")
	cfg, err := Parse(path, []byte(`[mux]
log_file = "logs/mux.log"
[[backend]]
name = "a"
command = "./bin/server"
[[backend]]
name = "b"
command = "bin/server"
cwd = "data"
[[backend]]
name = "c"
command = "go"
cwd = "./data/"
`), noEnv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if want := filepath.Join(dir, "logs/mux.log"); cfg.Mux.LogFile != want {
		t.Errorf("log_file = %q, want %q", cfg.Mux.LogFile, want)
	}
	for i, want := range [][2]string{
		{filepath.Join(dir, "bin/server"), ""},
		{filepath.Join(dir, "data/bin/server"), filepath.Join(dir, "data")},
		{"go", filepath.Join(dir, "data")},
	} {
		if b := cfg.Backends[i]; b.Command != want[0] || b.Cwd != want[1] {
			t.Errorf("backend %s: command %q, cwd %q; want %q, %q", b.Name, b.Command, b.Cwd, want[0], want[1])
		}
	}

	rel := "(relative to the config file's directory " + dir + ")"
	_, err = Parse(path, []byte(`[mux]
log_file = "nologs/mux.log"
[[backend]]
name = "a"
command = "./nobin/server"
[[backend]]
name = "b"
command = "go"
cwd = "nodata"
[[backend]]
name = "c"
command = "nobin/server"
cwd = "data"
`), noEnv)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: %v, want problems", err)
	}
	checkProblems(t, path, ce.Problems, []wantProblem{
		{2, `mux.log_file: directory "nologs" ` + rel + ` does not exist`},
		{5, fmt.Sprintf(`backend #1 (a).command: command "./nobin/server" not found (looked at %q): a relative command path is relative to the config file's directory`, filepath.Join(dir, "nobin/server"))},
		{9, `backend #2 (b).cwd: directory "nodata" ` + rel + ` does not exist`},
		{12, fmt.Sprintf(`backend #3 (c).command: command "nobin/server" not found (looked at %q): a relative command path is relative to cwd`, filepath.Join(dir, "data/nobin/server"))},
	})
}

// TestJSONClientConfigGetsImportHint: a client's JSON config passed as
// mcp-mux's config is named as such, with the command that converts it,
// not reported as a TOML syntax error.
func TestJSONClientConfigGetsImportHint(t *testing.T) {
	cases := map[string]string{
		"claude_desktop_config.json": `{"mcpServers": {"github": {"command": "npx", "env": {"GITHUB_TOKEN": "ghp_S3CR3Tvalue0123456789abcdefABCDEF"}}}}`,
		"mcp.json":                   "\ufeff\n  {\n  // VS Code allows comments\n  \"servers\": {}\n}\n",
	}
	for name, src := range cases {
		_, problems := parseString(t, src, noEnv)
		all := problemStrings(problems)
		if len(problems) != 1 {
			t.Errorf("%s: want one problem, got%s", name, all)
			continue
		}
		p := problems[0]
		if !strings.Contains(p.Message, "JSON client config") || !strings.Contains(p.Message, "mcp-mux import test.toml") {
			t.Errorf("%s: no import hint:%s", name, all)
		}
		if strings.Contains(all, "syntax error") || strings.Contains(all, "S3CR3T") {
			t.Errorf("%s: syntax error or value shown:%s", name, all)
		}
	}
}

func TestConfigProtocolMustBeAutoOrAbsent(t *testing.T) {
	_, ps := parseString(t, "[[backend]]\nname = \"a\"\ncommand = \"go\"\nprotocol = \"2026-07-28\"\n", noEnv)
	if len(ps) != 1 || ps[0].Line != 4 || !strings.Contains(ps[0].Message, `"auto"`) {
		t.Errorf("problems = %v, want one at line 4 naming \"auto\"", ps)
	}
}

// TestParseForServingKeepsTheOtherBackends: when serving, a mistake that
// belongs to one backend marks it Broken (with FILE:LINE) and the others
// load; a mistake in [mux] leaves that setting at its default and is a
// warning; only a file that does not parse is an error.
func TestParseForServingKeepsTheOtherBackends(t *testing.T) {
	src := `[mux]
request_timeout = "soon"
max_message_size = 12

[[backend]]
name = "good"
command = "go"

[[backend]]
name = "unset"
command = "go"
env = { T = "${NOT_SET_ANYWHERE}" }

[[backend]]
name = "good"
command = "go"

[[backend]]
name = "bad name"
url = "ftp://x"
`
	cfg, err := ParseForServing("serve.toml", []byte(src), noEnv)
	if err != nil {
		t.Fatalf("ParseForServing: %v", err)
	}
	var got []string
	for _, b := range cfg.Backends {
		got = append(got, fmt.Sprintf("%s broken=%v", b.Name, b.Broken != ""))
	}
	if want := "[good broken=false unset broken=true backend #3 broken=true backend #4 broken=true]"; fmt.Sprint(got) != want {
		t.Errorf("backends %v, want %s", got, want)
	}
	// What a backend named by its place was called, for messages.
	if r1, r2, r3 := cfg.Backends[1].Renamed, cfg.Backends[2].Renamed, cfg.Backends[3].Renamed; r1 != "" || r2 != `"good", a duplicate name` || r3 != `"bad name", an invalid name` {
		t.Errorf("Renamed: %q, %q, %q", r1, r2, r3)
	}
	if b := cfg.Backends[1].Broken; !strings.HasPrefix(b, "serve.toml:12: backend #2 (unset).env.T: ${NOT_SET_ANYWHERE} is not set") {
		t.Errorf("unset's Broken = %q", b)
	}
	if b := cfg.Backends[3].Broken; !strings.Contains(b, "serve.toml:19:") || !strings.Contains(b, "serve.toml:20:") {
		t.Errorf("the fourth backend's Broken = %q, want both its lines", b)
	}
	if cfg.Mux.RequestTimeout.Duration != DefaultRequestTimeout || cfg.Mux.MaxMessageSize != DefaultMaxMessageSize {
		t.Errorf("[mux] mistakes kept: request_timeout %v, max_message_size %d", cfg.Mux.RequestTimeout, cfg.Mux.MaxMessageSize)
	}
	if w := problemStrings(cfg.Warnings); !strings.Contains(w, "serve.toml:2: mux.request_timeout") || !strings.Contains(w, "serve.toml:3: mux.max_message_size") {
		t.Errorf("warnings:%s\nwant the [mux] mistakes", w)
	}
	if _, err := Parse("serve.toml", []byte(src), noEnv); err == nil {
		t.Error("Parse (check's) accepted the file: it must stay strict")
	}
	if _, err := ParseForServing("serve.toml", []byte("[[backend]\n"), noEnv); err == nil {
		t.Error("a file that does not parse was accepted")
	}
}
