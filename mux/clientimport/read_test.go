package clientimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// sample copies testdata/import/rel into a new directory (keeping the
// path below testdata/import, as the clients' files are told apart by
// where they are), with @FIXTURE@ and @PROJECT@ replaced, and the remote
// servers' @..._ADDR@ by sampleAddrs, and returns the copy's path.
func sample(t *testing.T, rel, fixture, project string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../testdata/import", rel))
	if err != nil {
		t.Fatal(err)
	}
	quoted := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b[1 : len(b)-1])
	}
	data = bytes.ReplaceAll(data, []byte("@FIXTURE@"), []byte(quoted(fixture)))
	data = bytes.ReplaceAll(data, []byte("@PROJECT@"), []byte(quoted(project)))
	for placeholder, addr := range sampleAddrs {
		data = bytes.ReplaceAll(data, []byte(placeholder), []byte(addr))
	}
	path := filepath.Join(t.TempDir(), rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sampleAddrs stand for the remote servers of the samples: the end-to-end
// test (mux/e2e/import_e2e_test.go) puts the addresses of real ones there.
var sampleAddrs = map[string]string{
	"@SSE_ADDR@": "sse.test", "@HTTP_ADDR@": "http.test:8080", "@SEARCH_ADDR@": "search.test", "@DOCS_ADDR@": "docs.test",
}

func readSample(t *testing.T, path string) *File {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Read(path, data, Options{Home: "/home/me"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// server finds the server named name (of project, "" for a top-level one).
func server(t *testing.T, f *File, name, project string) *Server {
	t.Helper()
	for i := range f.Servers {
		if s := &f.Servers[i]; s.Name == name && s.Project == project {
			return s
		}
	}
	t.Fatalf("%s: no server %q (project %q) in %+v", f.Path, name, project, f.Servers)
	return nil
}

func TestImportReadsEachClientFormat(t *testing.T) {
	fixture, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()

	t.Run("Claude Desktop", func(t *testing.T) {
		f := readSample(t, sample(t, "claude_desktop_config.json", fixture, project))
		if f.Client != ClientClaudeDesktop || f.Project != "" || len(f.Servers) != 4 {
			t.Fatalf("client %q project %q, %d servers", f.Client, f.Project, len(f.Servers))
		}
		notes := server(t, f, "notes", "")
		want := map[string]string{
			"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
			"NOTES_DIR":                    `C:\Users\me\notes "work"`,
			"GREETING":                     "héllo ☃, price $5 and $$$ kept", // "$$" escaped for mcp-mux's expansion
		}
		if notes.Command != fixture || !reflect.DeepEqual(notes.Args, []string{"-name", "notes", "-tools", "add,list"}) || !reflect.DeepEqual(notes.Env, want) || notes.Cwd != "" {
			t.Errorf("notes: %+v", notes)
		}
		tasks := server(t, f, "My Tasks", "")
		if tasks.Command != fixture || !reflect.DeepEqual(tasks.Args, []string{"-name", "tasks", "-resources", "1"}) || tasks.Unusable != "" {
			t.Errorf("a command line with an existing program was not split: %+v", tasks)
		}
		if l := server(t, f, "linear", ""); !l.Remote() || l.URL != "http://sse.test/sse" || l.Transport != "auto" {
			t.Errorf("linear: %+v", l)
		}
		if d := server(t, f, "dev-server", ""); !strings.Contains(d.Unusable, "shell") {
			t.Errorf("a shell command line is not unusable: %+v", d)
		}
	})

	t.Run("Claude Code user file with projects", func(t *testing.T) {
		f := readSample(t, sample(t, "claude.json", fixture, project))
		if f.Client != ClientClaudeCode || len(f.Servers) != 4 {
			t.Fatalf("client %q, %d servers", f.Client, len(f.Servers))
		}
		if s := server(t, f, "notes", ""); s.Cwd != "" || s.Disabled {
			t.Errorf("top-level notes: %+v", s)
		}
		p := server(t, f, "notes", project)
		if p.Cwd != project || p.Disabled || !reflect.DeepEqual(p.Args, []string{"-name", "project-notes"}) {
			t.Errorf("project notes: %+v", p)
		}
		if s := server(t, f, "search", project); !s.Remote() || s.URL != "http://search.test/mcp" || s.Transport != "streamable" ||
			!reflect.DeepEqual(s.Headers, map[string]string{"Authorization": "Bearer ${SEARCH_TOKEN}"}) || !reflect.DeepEqual(s.Vars, []string{"SEARCH_TOKEN"}) || s.Cwd != "" {
			t.Errorf("search: %+v", s)
		}
		if s := server(t, f, "old", "/nonexistent/old-project"); !s.Disabled {
			t.Errorf("a server of a project that is gone is not disabled: %+v", s)
		}
	})

	t.Run("Claude Code .mcp.json", func(t *testing.T) {
		path := sample(t, "project/.mcp.json", fixture, project)
		f := readSample(t, path)
		s := server(t, f, "fixture", "")
		if f.Client != ClientClaudeCode || f.Project != filepath.Dir(path) || s.Cwd != filepath.Dir(path) {
			t.Errorf("client %q project %q cwd %q", f.Client, f.Project, s.Cwd)
		}
		if !reflect.DeepEqual(s.Env, map[string]string{"API_KEY": "${API_KEY}", "MODE": "${FIXTURE_MODE:-fast}"}) || !reflect.DeepEqual(s.Vars, []string{"API_KEY"}) {
			t.Errorf("Claude Code's ${VAR} forms are not kept: env %v vars %v", s.Env, s.Vars)
		}
	})

	t.Run("Cursor", func(t *testing.T) {
		path := sample(t, "cursor/.cursor/mcp.json", fixture, project)
		f := readSample(t, path)
		ws := filepath.Dir(filepath.Dir(path))
		s := server(t, f, "fixture", "")
		if f.Client != ClientCursor || f.Project != ws || s.Env["ROOT"] != ws || s.Env["TOKEN"] != "${CURSOR_TOKEN}" {
			t.Errorf("client %q project %q env %v", f.Client, f.Project, s.Env)
		}
		if r := server(t, f, "remote", ""); !r.Remote() || r.URL != "http://http.test:8080/mcp" || r.Transport != "auto" ||
			!reflect.DeepEqual(r.Headers, map[string]string{"X-Api-Key": "${REMOTE_KEY}"}) || !reflect.DeepEqual(r.Vars, []string{"REMOTE_KEY"}) {
			t.Errorf("remote: %+v", r)
		}
		// ~/.cursor/mcp.json is the user's, not a project's.
		home := t.TempDir()
		os.MkdirAll(filepath.Join(home, ".cursor"), 0o755)
		user := filepath.Join(home, ".cursor", "mcp.json")
		os.WriteFile(user, []byte(`{"mcpServers": {"x": {"command": "x", "args": ["${workspaceFolder}"]}}}`), 0o644)
		data, _ := os.ReadFile(user)
		uf, err := Read(user, data, Options{Home: home})
		if err != nil {
			t.Fatal(err)
		}
		if uf.Project != "" || !strings.Contains(uf.Servers[0].Unusable, "${workspaceFolder}") {
			t.Errorf("user-level Cursor file: project %q, %+v", uf.Project, uf.Servers[0])
		}
	})

	t.Run("VS Code", func(t *testing.T) {
		path := sample(t, "vscode/.vscode/mcp.json", fixture, project)
		ws := filepath.Dir(filepath.Dir(path))
		env, _ := os.ReadFile("../../testdata/import/vscode/.env")
		os.WriteFile(filepath.Join(ws, ".env"), env, 0o644)
		f := readSample(t, path)
		if f.Client != ClientVSCode || f.Project != ws || len(f.Servers) != 3 || len(f.Notes) != 1 {
			t.Fatalf("client %q project %q, %d servers, notes %q", f.Client, f.Project, len(f.Servers), f.Notes)
		}
		s := server(t, f, "fixture", "")
		want := map[string]string{
			"DATA_DIR":      "/home/me" + string(filepath.Separator) + "data",
			"TOKEN":         "${VSCODE_TOKEN}", // the entry's env wins over its envFile
			"API_KEY":       "${API_KEY}",
			"FROM_ENV_FILE": "yes",
			"QUOTED":        `a "b" c`,
			"DB_PASSWORD":   "hunter2hunter2",
		}
		if !reflect.DeepEqual(s.Env, want) || s.Cwd != ws || s.Unusable != "" {
			t.Errorf("fixture: env %v cwd %q unusable %q", s.Env, s.Cwd, s.Unusable)
		}
		if !reflect.DeepEqual(s.Vars, []string{"API_KEY", "VSCODE_TOKEN"}) || !strings.Contains(strings.Join(s.Notes, "\n"), "${input:api-key} (Fixture API key) became ${API_KEY}") ||
			!slices.Contains(s.Notes, `its key "dev" was left out, as mcp-mux has no equivalent`) {
			t.Errorf("vars %v notes %q", s.Vars, s.Notes)
		}
		// As VS Code writes them, for the env of mcp-mux's entry there.
		if want := map[string]string{"API_KEY": "${input:api-key}", "VSCODE_TOKEN": "${env:VSCODE_TOKEN}"}; !reflect.DeepEqual(s.VarRefs, want) {
			t.Errorf("var refs %q, want %q", s.VarRefs, want)
		}
		if d := server(t, f, "docs", ""); d.Transport != "streamable" || d.URL != "http://docs.test/mcp" || d.Headers["Authorization"] != "Bearer sk-docsQpWoEiRuTyAlSkDj" {
			t.Errorf("docs: %+v", d)
		}
		if e := server(t, f, "events", ""); e.Transport != "sse" || e.URL != "http://sse.test/sse" {
			t.Errorf("events: %+v", e)
		}
	})
}

func TestImportVariablesBecomeMcpMuxsOrMakeTheEntryUnusable(t *testing.T) {
	c := &converter{file: &File{Client: ClientVSCode}, home: "/home/me", project: "/ws", inputs: map[string]vsInput{}}
	cases := []struct{ in, want, unusable string }{
		{"${env:GITHUB_TOKEN}", "${GITHUB_TOKEN}", ""},
		{"Bearer ${env:T}", "Bearer ${T}", ""},
		{"${userHome}/x", "/home/me/x", ""},
		{"${workspaceFolder}/src:${workspaceFolderBasename}", "/ws/src:ws", ""},
		{"${input:my-key}", "${MY_KEY}", ""},
		{"${NAME:-a default}", "${NAME:-a default}", ""},
		{"cost $5, $$, a$", "cost $5, $$$, a$", ""},
		{"$${env:X}", "$$${X}", ""},
		{"${unclosed", "$${unclosed", ""},
		{"${config:editor.fontSize}", "", "${config:...}"},
		{"${env:not a name}", "", "${env:...}"},
		{"${}", "", "a ${...}"},
	}
	for _, tc := range cases {
		s := &Server{}
		got := c.vars(s, tc.in, "env")
		if tc.unusable != "" {
			if !strings.Contains(s.Unusable, tc.unusable) {
				t.Errorf("%q: unusable %q, want it to name %s", tc.in, s.Unusable, tc.unusable)
			}
			continue
		}
		if got != tc.want || s.Unusable != "" {
			t.Errorf("%q became %q (unusable %q), want %q", tc.in, got, s.Unusable, tc.want)
		}
	}
	// What mcp-mux makes of an escaped literal is what the client had.
	for in, want := range map[string]string{"cost $5, $$$, a$": "cost $5, $$, a$", "$$${X}": "$x", "$${unclosed": "${unclosed"} {
		src := fmt.Sprintf("[[backend]]\nname = \"b\"\ncommand = %q\nenv = { V = %q }\n", os.Args[0], in)
		cfg, err := config.Parse("test.toml", []byte(src), envOf(map[string]string{"X": "x"}))
		if err != nil || cfg.Backends[0].Env["V"] != want {
			t.Errorf("%q: %v, want it to expand to %q", in, err, want)
		} else if len(cfg.Warnings) > 0 {
			t.Errorf("%q: warnings %v", in, cfg.Warnings)
		}
	}
}

// TestImportInputDefaultsBecomeVariableDefaults: a VS Code input with a
// "default" (a pickString's preselected option, a promptString's prefilled
// text) becomes ${NAME:-default}, which need not be set; a password's
// default is not copied into the file, nor one that ${...:-} cannot hold.
func TestImportInputDefaultsBecomeVariableDefaults(t *testing.T) {
	exe, _ := os.Executable()
	data := []byte(`{
  "inputs": [
    {"type": "pickString", "id": "region", "description": "Region", "options": ["us", "eu"], "default": "eu"},
    {"type": "promptString", "id": "user-name", "default": "me $HOME"},
    {"type": "promptString", "id": "api-key", "password": true, "default": "sk-notInTheFile0123456789"},
    {"type": "promptString", "id": "brace", "default": "a}b"},
    {"type": "pickString", "id": "none", "options": ["x"]}
  ],
  "servers": {
    "s": {"command": ` + strconv.Quote(exe) + `, "env": {
      "REGION": "${input:region}", "USER_NAME": "${input:user-name}", "KEY": "${input:api-key}",
      "BRACE": "${input:brace}", "NONE": "${input:none}"}}
  }
}`)
	f, err := Read(filepath.Join(t.TempDir(), ".vscode", "mcp.json"), data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &f.Servers[0]
	want := map[string]string{"REGION": "${REGION:-eu}", "USER_NAME": "${USER_NAME:-me $HOME}", "KEY": "${API_KEY}", "BRACE": "${BRACE}", "NONE": "${NONE}"}
	// Vars: in the order of env's keys.
	if !reflect.DeepEqual(s.Env, want) || !reflect.DeepEqual(s.Vars, []string{"BRACE", "API_KEY", "NONE"}) {
		t.Errorf("env %q vars %q, want %q", s.Env, s.Vars, want)
	}
	notes := strings.Join(s.Notes, "\n")
	for _, note := range []string{"${input:region} (Region) became ${REGION:-eu}", "its default is not copied, as it is a password", `its default "a}b" cannot be a default of mcp-mux's ${...}`} {
		if !strings.Contains(notes, note) {
			t.Errorf("notes lack %q:\n%s", note, notes)
		}
	}
	res := Render([]*File{f})
	if strings.Contains(string(res.TOML), "notInTheFile") {
		t.Errorf("a password's default is in the file:\n%s", res.TOML)
	}
	cfg := parseImported(t, res, map[string]string{"API_KEY": "k", "BRACE": "b", "NONE": "n"})
	if env := cfg.Backends[0].Env; env["REGION"] != "eu" || env["USER_NAME"] != "me $HOME" || len(cfg.Warnings) > 0 {
		t.Errorf("loaded env %q, warnings %v", env, cfg.Warnings)
	}
}

func TestImportSplitsACommandLineOnlyWhenUnambiguous(t *testing.T) {
	dir := t.TempDir()
	spaced := filepath.Join(dir, "my server")
	os.WriteFile(spaced, []byte("#!/bin/sh\n"), 0o755)
	cases := []struct {
		command  string
		args     []string
		wantCmd  string
		wantArgs []string
		unusable bool
	}{
		{"npx -y @scope/pkg", nil, "npx", []string{"-y", "@scope/pkg"}, false},
		{"uvx  mcp-server-time --local-timezone UTC", nil, "uvx", []string{"mcp-server-time", "--local-timezone", "UTC"}, false},
		{"npx -y pkg", []string{"--flag"}, "npx -y pkg", []string{"--flag"}, false}, // args given: taken as written
		{spaced, nil, spaced, nil, false}, // an existing path with a space
		{"/Applications/My App/server", nil, "/Applications/My App/server", nil, false},
		{`node "my file.js"`, nil, `node "my file.js"`, nil, false},
		{`C:\Program Files (x86)\nodejs\node.exe`, nil, `C:\Program Files (x86)\nodejs\node.exe`, nil, false},
		{"$HOME/bin/server --stdio", nil, "$HOME/bin/server --stdio", nil, false},
		{"cd /srv && ./server", nil, "", nil, true},
		{"server $(cat args)", nil, "", nil, true},
		{"server | tee log", nil, "", nil, true},
	}
	for _, tc := range cases {
		entry := map[string]any{"command": tc.command}
		if tc.args != nil {
			entry["args"] = tc.args
		}
		data, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"s": entry}})
		f, err := Read("claude_desktop_config.json", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := f.Servers[0]
		if tc.unusable {
			if s.Unusable == "" {
				t.Errorf("%q: not unusable: %+v", tc.command, s)
			}
			continue
		}
		if s.Command != tc.wantCmd || !reflect.DeepEqual(s.Args, tc.wantArgs) || s.Unusable != "" {
			t.Errorf("%q %q: got %q %q (unusable %q)", tc.command, tc.args, s.Command, s.Args, s.Unusable)
		}
		if (s.Command != tc.command) != strings.Contains(strings.Join(s.Notes, " "), "was split") {
			t.Errorf("%q: notes %q", tc.command, s.Notes)
		}
	}
}

func TestImportJSONErrorsGiveLineAndColumnNotText(t *testing.T) {
	data := []byte("{\n  \"mcpServers\": {\n    \"x\": {\"env\": {\"T\": \"ghp_S3CR3Tvalue0123\" oops}}\n  }\n}\n")
	_, err := Read("bad.json", data, Options{})
	if err == nil || !strings.Contains(err.Error(), "bad.json:3:") || strings.Contains(err.Error(), "S3CR3T") {
		t.Errorf("error: %v", err)
	}
	for _, src := range []string{`[]`, `{"other": 1}`, ``} {
		if _, err := Read("x.json", []byte(src), Options{}); err == nil {
			t.Errorf("%q: no error", src)
		}
	}
}

func TestClientConfigLocationsPerOS(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	paths := func(locs []Location) []string {
		var out []string
		for _, l := range locs {
			out = append(out, l.Client+": "+l.Path)
		}
		return out
	}
	j := filepath.Join
	cases := []struct {
		goos string
		env  map[string]string
		want []string
	}{
		{"darwin", map[string]string{"HOME": "/Users/me"}, []string{
			"Claude Desktop: " + j("/Users/me", "Library", "Application Support", "Claude", "claude_desktop_config.json"),
			"Claude Code: " + j("/Users/me", ".claude.json"),
			"Claude Code: " + j("/proj", ".mcp.json"),
			"Cursor: " + j("/Users/me", ".cursor", "mcp.json"),
			"Cursor: " + j("/proj", ".cursor", "mcp.json"),
			"VS Code: " + j("/Users/me", "Library", "Application Support", "Code", "User", "mcp.json"),
			"VS Code: " + j("/proj", ".vscode", "mcp.json"),
		}},
		{"linux", map[string]string{"HOME": "/home/me", "XDG_CONFIG_HOME": "/xdg"}, []string{
			"Claude Desktop: " + j("/xdg", "Claude", "claude_desktop_config.json"),
			"Claude Code: " + j("/home/me", ".claude.json"),
			"Claude Code: " + j("/proj", ".mcp.json"),
			"Cursor: " + j("/home/me", ".cursor", "mcp.json"),
			"Cursor: " + j("/proj", ".cursor", "mcp.json"),
			"VS Code: " + j("/xdg", "Code", "User", "mcp.json"),
			"VS Code: " + j("/proj", ".vscode", "mcp.json"),
		}},
		{"windows", map[string]string{"USERPROFILE": `C:\Users\me`, "APPDATA": `C:\Users\me\AppData\Roaming`}, []string{
			"Claude Desktop: " + j(`C:\Users\me\AppData\Roaming`, "Claude", "claude_desktop_config.json"),
			"Claude Code: " + j(`C:\Users\me`, ".claude.json"),
			"Claude Code: " + j("/proj", ".mcp.json"),
			"Cursor: " + j(`C:\Users\me`, ".cursor", "mcp.json"),
			"Cursor: " + j("/proj", ".cursor", "mcp.json"),
			"VS Code: " + j(`C:\Users\me\AppData\Roaming`, "Code", "User", "mcp.json"),
			"VS Code: " + j("/proj", ".vscode", "mcp.json"),
		}},
	}
	for _, tc := range cases {
		if got := paths(Locations(tc.goos, env(tc.env), "/proj")); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.goos, got, tc.want)
		}
	}
	// In the home directory, the project's files are the user's: listed once.
	if got := Locations("linux", env(map[string]string{"HOME": "/home/me"}), "/home/me"); len(got) != 6 {
		t.Errorf("cwd = home: %q", paths(got))
	}
}
