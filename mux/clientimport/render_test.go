package clientimport

// Tests of the TOML that import writes (render.go) and of the
// starter config of init (starter.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// importJSON runs a client file made of servers through the whole import:
// JSON, Read, Render.
func importJSON(t *testing.T, name string, servers map[string]any) *Result {
	t.Helper()
	data, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	f, err := Read(path, data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return Render([]*File{f})
}

// parseImported parses the TOML of res as mcp-mux does.
func parseImported(t *testing.T, res *Result, env map[string]string) *config.File {
	t.Helper()
	cfg, err := config.Parse("imported.toml", res.TOML, envOf(env))
	if err != nil {
		t.Fatalf("the imported config does not load: %v\n%s", err, res.TOML)
	}
	return cfg
}

// TestImportedValuesParseBackIntact: every value a client had, however
// odd (quotes, backslashes, Windows paths, unicode, control characters,
// dollars), is what mcp-mux loads from the TOML written for it.
func TestImportedValuesParseBackIntact(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	name := `dir "q" 'a' \ ☃`
	if runtime.GOOS == "windows" {
		name = `dir 'a' ☃` // no " in a Windows file name; \ separates
	}
	cwd := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	values := []string{
		`plain`, `"quoted"`, `it's`, `both ' and "`, `C:\Program Files\nodejs\node.exe`, `\\server\share\`,
		"tab\there", "new\nline", "cr\r\nlf", "bell\x07 del\x7f nul-free", "ünïcödé ☃ 日本語 🚀", "$5 $$ a$", "$${not a ref",
		`'single'`, `"""triple"""`, `'''`, `\u0041 not an escape`, "",
	}
	args := append([]string{}, values...)
	env := map[string]string{"odd.key": "x", "with space": "y", "ÜNI": "z"}
	for i, v := range values {
		env[fmt.Sprintf("V%d", i)] = v
	}
	res := importJSON(t, "claude_desktop_config.json", map[string]any{
		"odd": map[string]any{"command": exe, "args": args, "env": env, "cwd": cwd},
	})
	cfg := parseImported(t, res, nil)
	if len(cfg.Backends) != 1 {
		t.Fatalf("%d backends\n%s", len(cfg.Backends), res.TOML)
	}
	b := cfg.Backends[0]
	if b.Command != exe || b.Cwd != cwd || !reflect.DeepEqual(b.Args, args) || !reflect.DeepEqual(b.Env, env) {
		t.Errorf("loaded back differently:\ncommand %q\ncwd %q\nargs %q\nenv %q\nfrom:\n%s", b.Command, b.Cwd, b.Args, b.Env, res.TOML)
	}
}

func TestImportNamesAreSanitizedAndCollisionsSuffixed(t *testing.T) {
	exe, _ := os.Executable()
	file := func(name string, servers ...string) *File {
		var entries []string
		for i := 0; i < len(servers); i += 2 {
			n, _ := json.Marshal(servers[i])
			entries = append(entries, fmt.Sprintf(`%s: {"command": %q, "args": [%q]}`, n, exe, servers[i+1]))
		}
		data := "{\"mcpServers\": {" + strings.Join(entries, ", ") + "}}"
		f, err := Read(name, []byte(data), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f1 := file("/a/claude_desktop_config.json", "my server", "1", "@scope/pkg", "2", "a__b", "3", "☃", "4", "x", "5")
	f2 := file("/b/.cursor/mcp.json", "x", "6", "x!", "7")
	res := Render([]*File{f1, f2})
	cfg := parseImported(t, res, nil)
	var got []string
	for _, b := range cfg.Backends {
		got = append(got, b.Name+"="+b.Args[0])
	}
	want := []string{"my-server=1", "scope-pkg=2", "a_b=3", "server=4", "x=5", "x-2=6", "x-3=7"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("names %q, want %q", got, want)
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a } // C:\a\... on Windows
	for _, comment := range []string{`# "my server" from ` + abs("/a/claude_desktop_config.json") + ` (Claude Desktop), renamed`,
		`# "x" from ` + abs("/b/.cursor/mcp.json") + ` (Cursor), named x-2 as x is another`} {
		if !strings.Contains(string(res.TOML), comment) {
			t.Errorf("no comment %q in\n%s", comment, res.TOML)
		}
	}
}

func TestImportSameServerInTwoFilesIsImportedOnce(t *testing.T) {
	exe, _ := os.Executable()
	entry := map[string]any{"command": exe, "args": []string{"-v"}, "env": map[string]string{"A": "1"}}
	var files []*File
	for _, name := range []string{"claude_desktop_config.json", "mcp.json", "other.json"} {
		e := entry
		if name == "other.json" {
			e = map[string]any{"command": exe, "args": []string{"-v"}, "env": map[string]string{"A": "2"}}
		}
		data, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"tool": e}})
		f, err := Read(filepath.Join(t.TempDir(), name), data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	res := Render(files)
	cfg := parseImported(t, res, nil)
	if len(cfg.Backends) != 2 || cfg.Backends[0].Name != "tool" || cfg.Backends[1].Name != "tool-2" || cfg.Backends[1].Env["A"] != "2" {
		t.Errorf("backends %+v\n%s", cfg.Backends, res.TOML)
	}
	if len(res.Duplicates) != 1 || !strings.Contains(res.Duplicates[0], "mcp.json") || !strings.Contains(string(res.TOML), "imported once") {
		t.Errorf("duplicates %q", res.Duplicates)
	}
}

// TestImportSameServerInAUserAndAProjectFileIsImportedOnce: a server
// defined the same in a user-level file and in a project's (Claude
// Desktop's and a .mcp.json, or ~/.claude.json's projects), where only the
// project directory it runs in differs, is imported once, as the first
// file read has it, with a comment naming the other files; one that
// differs in anything else is another backend.
func TestImportSameServerInAUserAndAProjectFileIsImportedOnce(t *testing.T) {
	exe, _ := os.Executable()
	home, proj, proj2 := t.TempDir(), t.TempDir(), t.TempDir()
	mem := map[string]any{"command": exe, "args": []string{"-v"}, "env": map[string]string{"A": "1"}}
	other := map[string]any{"command": exe, "args": []string{"-v"}, "env": map[string]string{"A": "2"}}
	solo := map[string]any{"command": exe, "args": []string{"-s"}, "env": map[string]string{"A": "3"}}
	write := func(path string, v any) *File {
		t.Helper()
		data, _ := json.Marshal(v)
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, data, 0o644)
		f, err := Read(path, data, Options{Home: home})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	desktop := write(filepath.Join(home, ".config", "Claude", "claude_desktop_config.json"), map[string]any{"mcpServers": map[string]any{"mem": mem}})
	// A project that is gone comes first: the server is not imported
	// disabled for it.
	claude := write(filepath.Join(home, ".claude.json"), map[string]any{"projects": map[string]any{
		"/nonexistent/gone": map[string]any{"mcpServers": map[string]any{"mem": mem}},
		proj2:               map[string]any{"mcpServers": map[string]any{"memory": mem}},
	}})
	project := write(filepath.Join(proj, ".mcp.json"), map[string]any{"mcpServers": map[string]any{"mem": mem, "mem-env": other}})
	gone := write(filepath.Join(home, "g", ".claude.json"), map[string]any{"projects": map[string]any{
		"/nonexistent/gone": map[string]any{"mcpServers": map[string]any{"solo": solo}},
		proj2:               map[string]any{"mcpServers": map[string]any{"solo": solo}},
	}})

	res := Render([]*File{desktop, claude, project, gone})
	cfg := parseImported(t, res, nil)
	var got []string
	for _, b := range cfg.Backends {
		got = append(got, fmt.Sprintf("%s cwd=%q disabled=%v A=%s", b.Name, b.Cwd, b.Disabled, b.Env["A"]))
	}
	want := []string{
		`mem cwd="" disabled=false A=1`,
		fmt.Sprintf("mem-env cwd=%q disabled=false A=2", proj),
		fmt.Sprintf("solo cwd=%q disabled=false A=3", proj2),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("backends:\n got %q\nwant %q\n%s", got, want, res.TOML)
	}
	flat := strings.ReplaceAll(string(res.TOML), "\n# ", " ")
	for _, want := range []string{
		"Also defined, the same, in " + claude.Path + " (Claude Code, project /nonexistent/gone), where it runs in the project's directory.",
		"Also defined, the same, in " + claude.Path + " (Claude Code, project " + proj2 + `) as "memory", where it runs in the project's directory.`,
		"Also defined, the same, in " + project.Path + " (Claude Code), where it runs in the project's directory.",
		"Also defined, the same, in " + gone.Path + " (Claude Code, project /nonexistent/gone).",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("missing %q in\n%s", want, res.TOML)
		}
	}
	if len(res.Duplicates) != 4 || len(res.Renamed) != 0 {
		t.Errorf("duplicates %q renamed %q", res.Duplicates, res.Renamed)
	}
}

// TestImportTurnsRemoteServersIntoRemoteBackends: a client's url entries
// become remote backends (url, transport, headers with the clients'
// variables made mcp-mux's, a literal token marked as a secret); what
// mcp-mux could not load as written is kept commented out with the reason.
func TestImportTurnsRemoteServersIntoRemoteBackends(t *testing.T) {
	exe, _ := os.Executable()
	token := "sk-live0123456789abcdef"
	res := importJSON(t, "mcp.json", map[string]any{
		"local":      map[string]any{"command": exe},
		"sse":        map[string]any{"type": "sse", "url": "https://example.com/sse", "headers": map[string]string{"Authorization": "Bearer " + token}},
		"http":       map[string]any{"type": "http", "url": "https://example.com/mcp"},
		"streamable": map[string]any{"type": "streamable-http", "url": "https://example.com/s"},
		"nourl":      map[string]any{"url": "https://example.com/any", "disabled": true},
		"vars": map[string]any{"type": "http", "url": "http://127.0.0.1:8931/mcp", "headers": map[string]any{
			"X-Api-Key": "${env:REMOTE_KEY}", "X-Other": "${input:other-key}", "X-Price": "$5 $$ ${DEFAULTED:-d}",
			"Content-Type": "application/json", "X-Count": 3,
		}},
		"both":      map[string]any{"type": "http", "url": "https://example.com/both", "command": exe, "env": map[string]string{"T": "x"}},
		"urlvar":    map[string]any{"type": "http", "url": "https://${env:HOST}/mcp"},
		"ws":        map[string]any{"url": "ws://example.com/mcp"},
		"typeonly":  map[string]any{"type": "sse"},
		"badheader": map[string]any{"url": "https://example.com/h", "headers": map[string]string{"Authorization: Bearer " + token: ""}},
		"bad":       map[string]any{"type": "websocket", "command": exe},
		"nocmd":     map[string]any{"args": []string{"x"}},
		"badarg":    map[string]any{"command": exe, "args": []any{map[string]any{}}},
	})
	cfg := parseImported(t, res, map[string]string{"REMOTE_KEY": "rk", "OTHER_KEY": "ok"})
	type remote struct {
		URL, Transport string
		Headers        map[string]string
		Disabled       bool
	}
	want := map[string]remote{
		"both":       {"https://example.com/both", "streamable", nil, false},
		"http":       {"https://example.com/mcp", "streamable", nil, false},
		"nourl":      {"https://example.com/any", "auto", nil, true},
		"sse":        {"https://example.com/sse", "sse", map[string]string{"Authorization": "Bearer " + token}, false},
		"streamable": {"https://example.com/s", "streamable", nil, false},
		"vars": {"http://127.0.0.1:8931/mcp", "streamable", map[string]string{
			"X-Api-Key": "rk", "X-Other": "ok", "X-Price": "$5 $$ d", "X-Count": "3"}, false},
	}
	got := map[string]remote{}
	for _, b := range cfg.Backends {
		if b.Name == "local" {
			if b.Command != exe || b.URL != "" {
				t.Errorf("local: %+v", b)
			}
			continue
		}
		if b.Command != "" || b.Env != nil || b.Args != nil {
			t.Errorf("%s: a remote backend with a command's keys: %+v", b.Name, b)
		}
		got[b.Name] = remote{b.URL, b.Transport, b.Headers, b.Disabled}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("remote backends:\n got %+v\nwant %+v\n%s", got, want, res.TOML)
	}
	if len(cfg.Warnings) > 0 {
		t.Errorf("warnings: %v\n%s", cfg.Warnings, res.TOML)
	}
	if wantVars := []string{"OTHER_KEY", "REMOTE_KEY"}; !reflect.DeepEqual(res.Vars, wantVars) {
		t.Errorf("vars %q, want %q", res.Vars, wantVars)
	}
	if wantSecrets := []string{"sse.headers.Authorization"}; !reflect.DeepEqual(res.Secrets, wantSecrets) {
		t.Errorf("secrets %q, want %q", res.Secrets, wantSecrets)
	}
	text := string(res.TOML)
	for _, want := range []string{
		"url = \"https://example.com/any\"\ntransport = \"auto\"\ndisabled = true\n",
		"\n[backend.headers]\n# headers.Authorization looks like a secret (its value looks like a token): see \"Secrets\"",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in\n%s", want, text)
		}
	}
	// The comments, unwrapped.
	flat := strings.ReplaceAll(text, "\n# ", " ")
	for _, want := range []string{
		`Authorization = "Bearer ${SSE_TOKEN}"`, // how to move a header's token out
		"Its header \"Content-Type\" was left out, as the transport sets it",
		"Its keys \"command\", \"env\" were left out, as a remote server runs nothing",
		"Not imported, as its url uses a variable (${...}), which mcp-mux does not expand in url",
		"Not imported, as its url is not an http:// or https:// URL",
		"Not imported, as it has type \"sse\" but no url",
		"Not imported, as its header name \"Authorization...\" is not a valid header name",
		`Not imported, as its type "websocket" is not a transport mcp-mux knows`,
		"Not imported, as it has no command",
		"Not imported, as its args are not a list of strings",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("missing %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "not supported") {
		t.Errorf("remote servers said to be unsupported:\n%s", text)
	}
	if len(res.Commented) != 7 {
		t.Errorf("commented %q", res.Commented)
	}
	for _, list := range [][]string{res.Backends, res.Secrets, res.Commented, res.Warnings, res.Renamed} {
		if strings.Contains(strings.Join(list, " "), token[:10]) {
			t.Errorf("a header value in the result's lists: %q", list)
		}
	}
}

// TestImportSaysWhichKeysOfAnImportedServerWereLeftOut: a server imported
// without some of its keys (VS Code's "dev", a remote server's command) is
// said to have lost those keys, never to be "not imported" itself, which
// is what a server kept commented out is told.
func TestImportSaysWhichKeysOfAnImportedServerWereLeftOut(t *testing.T) {
	exe, _ := os.Executable()
	data, _ := json.Marshal(map[string]any{"servers": map[string]any{
		"dev":    map[string]any{"type": "stdio", "command": exe, "dev": map[string]any{"watch": "src/**/*.ts"}},
		"two":    map[string]any{"command": exe, "args": []string{"2"}, "dev": map[string]any{}, "gallery": true},
		"remote": map[string]any{"type": "http", "url": "https://example.com/mcp", "command": exe, "env": map[string]string{"A": "1"}},
	}})
	f, err := Read(filepath.Join(t.TempDir(), ".vscode", "mcp.json"), data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := Render([]*File{f})
	if cfg := parseImported(t, res, nil); len(cfg.Backends) != 3 || len(res.Commented) != 0 {
		t.Fatalf("%d backends, commented %q\n%s", len(cfg.Backends), res.Commented, res.TOML)
	}
	flat := strings.ReplaceAll(string(res.TOML), "\n# ", " ")
	for _, want := range []string{
		`Its key "dev" was left out, as mcp-mux has no equivalent.`,
		`Its keys "dev", "gallery" were left out, as mcp-mux has no equivalent.`,
		`Its keys "command", "env" were left out, as a remote server runs nothing.`,
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("missing %q in\n%s", want, res.TOML)
		}
	}
	if strings.Contains(flat, "Not imported") {
		t.Errorf("an imported server is said to be not imported:\n%s", res.TOML)
	}
}

// TestImportWritesTheSameBytesEveryRun: nothing of the order of Go's maps
// leaks into the TOML or the result's lists (keys, notes, variables,
// secrets), so that importing the same files twice gives the same file.
func TestImportWritesTheSameBytesEveryRun(t *testing.T) {
	exe, _ := os.Executable()
	headers := map[string]any{"X-Unknown": 1}
	env := map[string]any{}
	for i := range 8 {
		headers[fmt.Sprintf("X-Key-%d", i)] = fmt.Sprintf("${env:KEY_%d}", i)
		headers[fmt.Sprintf("X-Token-%d", i)] = fmt.Sprintf("Bearer sk-%d0123456789abcdefgh", i)
		env[fmt.Sprintf("TOKEN_%d", i)] = fmt.Sprintf("ghp_%d6C7e42F292c6912E7710c838347Ae178B4a", i)
		env[fmt.Sprintf("VAR_%d", i)] = fmt.Sprintf("${input:in-%d}", i)
	}
	servers := map[string]any{
		"remote": map[string]any{"url": "https://example.com/mcp", "headers": headers, "command": "x", "env": env, "cwd": "/", "a": 1, "b": 2, "c": 3},
		"local":  map[string]any{"command": exe, "env": env, "headers": headers, "z": 1, "y": 2, "x": 3},
		"bad":    map[string]any{"url": "ws://example.com", "headers": headers},
	}
	data, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mcp.json")
	render := func() *Result {
		f, err := Read(path, data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return Render([]*File{f})
	}
	first := render()
	if len(first.Secrets) < 16 || len(first.Vars) < 16 {
		t.Fatalf("secrets %q vars %q", first.Secrets, first.Vars)
	}
	for range 20 {
		if again := render(); !reflect.DeepEqual(again, first) {
			t.Fatalf("two imports of the same file differ:\n%s\n---\n%s", first.TOML, again.TOML)
		}
	}
}

func TestImportMarksWhatLooksLikeASecretAndKeepsIt(t *testing.T) {
	secret := []struct{ name, value string }{
		{"GITHUB_PERSONAL_ACCESS_TOKEN", "abc"},
		{"OPENAI_API_KEY", "whatever"},
		{"apiKey", "whatever"},
		{"DB_PASSWORD", "hunter2"},
		{"Authorization", "Basic dXNlcjpwYXNz"},
		{"X", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"},
		{"X", "sk-proj-abcdefghijklmnop"},
		{"X", "xoxb-1234-5678-abcdefgh"},
		{"DATABASE_URL", "postgres://user:pa55word@db.example.com/app"},
		{"X", "q7Zx9LmT2vB8nR4kW6yH3jD5"},
		{"X", "3f786850e387550fdab836ed7e6dc881de23001b"},
	}
	plain := []struct{ name, value string }{
		{"GITHUB_TOKEN", "${GITHUB_TOKEN}"},
		{"Authorization", "Bearer ${TOKEN}"},
		{"API_KEY", ""},
		{"PATH", "/usr/local/bin:/usr/bin"},
		{"GIT_AUTHOR_NAME", "Jane Doe"},
		{"KEYBOARD", "us"},
		{"NODE_ENV", "production"},
		{"ROOT", "/home/me/projects/some-long-directory-name"},
		{"URL", "https://example.com/api/v1/endpoint"},
		{"MODE", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa1"},
	}
	for _, s := range secret {
		if secretReason(s.name, s.value) == "" {
			t.Errorf("%s=%s is not taken for a secret", s.name, s.value)
		}
	}
	for _, s := range plain {
		if why := secretReason(s.name, s.value); why != "" {
			t.Errorf("%s=%s is taken for a secret (%s)", s.name, s.value, why)
		}
	}

	exe, _ := os.Executable()
	token := "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	res := importJSON(t, "claude_desktop_config.json", map[string]any{
		"github": map[string]any{"command": exe, "args": []string{"--token", "sk-abcdefghijklmnopqrst", "--verbose"},
			"env": map[string]string{"GITHUB_TOKEN": token, "LOG": "info"}},
	})
	if want := []string{"github.args #2", "github.env.GITHUB_TOKEN"}; !reflect.DeepEqual(res.Secrets, want) {
		t.Errorf("secrets %q, want %q", res.Secrets, want)
	}
	text := string(res.TOML)
	for _, want := range []string{"# env.GITHUB_TOKEN looks like a secret", "# args #2 looks like a secret", `GITHUB_TOKEN = "${GITHUB_TOKEN}"`, "Secrets:"} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in\n%s", want, text)
		}
	}
	if cfg := parseImported(t, res, nil); cfg.Backends[0].Env["GITHUB_TOKEN"] != token {
		t.Errorf("the secret was not kept")
	}
	for _, list := range [][]string{res.Backends, res.Secrets, res.Commented, res.Warnings, res.Renamed} {
		if strings.Contains(strings.Join(list, " "), token[:10]) {
			t.Errorf("a value in the result's lists: %q", list)
		}
	}
}

// fakePath makes a PATH of one directory holding the named programs.
func fakePath(t *testing.T, programs ...string) {
	dir := t.TempDir()
	for _, p := range programs {
		if runtime.GOOS == "windows" {
			p += ".cmd" // as npx is there: npx.cmd
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
}

func TestStarterConfigPassesCheckWithTheRunnerFound(t *testing.T) {
	cases := []struct {
		onPath []string
		want   string
		found  bool
	}{
		{[]string{"uvx", "npx"}, "time", true},
		{[]string{"npx"}, "thinking", true},
		{nil, "thinking", false},
	}
	for _, tc := range cases {
		fakePath(t, tc.onPath...)
		b, found := ChooseStarter(nil)
		if b.Name != tc.want || found != tc.found {
			t.Errorf("PATH with %q: %s (found %v), want %s (%v)", tc.onPath, b.Name, found, tc.want, tc.found)
		}
		src := StarterConfig(b)
		cfg, err := config.Parse("config.toml", src, noEnv)
		if !tc.found {
			if err == nil || !strings.Contains(err.Error(), `command "npx" not found`) {
				t.Errorf("without npx: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("PATH with %q: the starter does not load: %v\n%s", tc.onPath, err, src)
		}
		if len(cfg.Backends) != 1 || cfg.Backends[0].Name != tc.want || cfg.Mux.StartupTimeout.Duration != config.DefaultStartupTimeout {
			t.Errorf("starter: %+v", cfg)
		}
		// Every [mux] key of the starter, uncommented, is valid as written.
		uncommented := regexp.MustCompile(`(?m)^# ([a-z_]+ = .*)$`).ReplaceAll(src[:bytes.Index(src, []byte("[[backend]]"))], []byte("$1"))
		if _, err := config.Parse("config.toml", append(uncommented, src[bytes.Index(src, []byte("[[backend]]")):]...), noEnv); err != nil {
			t.Errorf("the starter's [mux] keys uncommented: %v", err)
		}
	}
}

// noEnv is a lookupEnv for an empty environment.
func noEnv(string) (string, bool) { return "", false }

// envOf is a lookupEnv for the variables in m.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestImportedConfigNamesNoFileOnlyACloneHas: a user who installed the
// binary has no mcp-mux.toml.example; the imported config's header names
// it by an address anyone can open, and `mcp-mux init`.
func TestImportedConfigNamesNoFileOnlyACloneHas(t *testing.T) {
	res := importJSON(t, "claude.json", map[string]any{"notes": map[string]any{"command": "go", "args": []string{"version"}}})
	const url = "https://github.com/mcp-mux/mcp-mux/blob/main/mcp-mux.toml.example"
	text := strings.ReplaceAll(string(res.TOML), "\n# ", " ") // comments are wrapped
	named, linked := strings.Count(text, "mcp-mux.toml.example"), strings.Count(text, url)
	if named != linked || !strings.Contains(text, "`mcp-mux init --output FILE`") {
		t.Errorf("the header names the example as a file (%d times, %d by its address), or does not name init:\n%s", named, linked, res.TOML)
	}
}
