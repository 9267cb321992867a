package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// End-to-end tests of `mcp-mux import` and `mcp-mux init`: the samples of
// each client's format under testdata/import, with the fixture as their
// server, converted by the binary, checked, and served.

// importSample copies testdata/import/rel into dir (keeping its path, as
// the clients' files are told apart by where they are), with @FIXTURE@
// and @PROJECT@ replaced; and a .env beside a .vscode directory. Its remote
// servers are at an address where nothing listens.
func importSample(t *testing.T, dir, rel, project string) string {
	t.Helper()
	return importSampleWith(t, dir, rel, project, nil)
}

// sampleRemotes are the placeholders of the samples' remote servers.
var sampleRemotes = []string{"@SSE_ADDR@", "@HTTP_ADDR@", "@SEARCH_ADDR@", "@DOCS_ADDR@"}

// importSampleWith is importSample with the remote servers' placeholders
// replaced by addrs (HOST:PORT).
func importSampleWith(t *testing.T, dir, rel, project string, addrs map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../testdata/import", rel))
	if err != nil {
		t.Fatal(err)
	}
	quoted := func(s string) []byte {
		b, _ := json.Marshal(s)
		return b[1 : len(b)-1]
	}
	data = bytes.ReplaceAll(data, []byte("@FIXTURE@"), quoted(testkit.FixtureBin(t)))
	data = bytes.ReplaceAll(data, []byte("@PROJECT@"), quoted(project))
	for _, placeholder := range sampleRemotes {
		addr, ok := addrs[placeholder]
		if !ok {
			addr = "127.0.0.1:9"
		}
		data = bytes.ReplaceAll(data, []byte(placeholder), []byte(addr))
	}
	path := filepath.Join(dir, rel)
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if filepath.Base(filepath.Dir(rel)) == ".vscode" {
		env, err := os.ReadFile(filepath.Join("../../testdata/import", filepath.Dir(filepath.Dir(rel)), ".env"))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(filepath.Dir(filepath.Dir(path)), ".env"), env, 0o644)
	}
	return path
}

// runEnv runs mcp-mux with args in dir with env (nil: the test's own).
func runEnv(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runBinEnv(t, testkit.MuxBin(t), dir, env, args...)
}

// runBinEnv is runEnv with the mcp-mux binary at bin.
func runBinEnv(t *testing.T, bin, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	return runCmd(t, cmd)
}

// runCmd runs cmd, an mcp-mux made ready to run, as runEnv does.
func runCmd(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	args := cmd.Args[1:]
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("mcp-mux %v still running after 30 s", args)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// fixtureTools lists the tools of the fixture run alone with args.
func fixtureTools(t *testing.T, args ...string) []string {
	t.Helper()
	return toolNames(t, &mcp.CommandTransport{Command: exec.Command(testkit.FixtureBin(t), args...)})
}

// remoteTools lists the tools of a remote fixture, asked directly with
// Authorization: Bearer token (when not "").
func remoteTools(t *testing.T, f *testkit.RemoteFixture, token string) []string {
	t.Helper()
	var client *http.Client
	if token != "" {
		client = &http.Client{Transport: withBearer{token}}
	}
	var transport mcp.Transport = &mcp.StreamableClientTransport{Endpoint: f.URL(), HTTPClient: client}
	if f.Mode == "-sse" {
		transport = &mcp.SSEClientTransport{Endpoint: f.URL(), HTTPClient: client}
	}
	return toolNames(t, transport)
}

// toolNames lists the tools of the server at the other end of transport.
func toolNames(t *testing.T, transport mcp.Transport) []string {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// withBearer adds Authorization: Bearer token to each request.
type withBearer struct{ token string }

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestImportedConfigOfEachClientPassesCheckAndServesTheSameToolsPrefixed:
// for each client's format, the TOML `mcp-mux import` writes passes
// `mcp-mux check`, and mcp-mux serving it offers exactly the tools of the
// client's servers, each under its backend's prefix: the stdio ones run
// from the fixture, the remote ones served by the fixture over HTTP on
// loopback (two of them answering only with their token: one the samples
// take from ${SEARCH_TOKEN}, one written in the sample). Nothing import
// says on stderr shows a secret of the files.
func TestImportedConfigOfEachClientPassesCheckAndServesTheSameToolsPrefixed(t *testing.T) {
	const searchToken, docsToken = "s3arch-tokenQxZvBnMwLk", "sk-docsQpWoEiRuTyAlSkDj" // docsToken: as in the VS Code sample
	// The variables the samples refer to, as the agent would set them.
	for k, v := range map[string]string{"API_KEY": "k", "CURSOR_TOKEN": "c", "VSCODE_TOKEN": "v", "REMOTE_KEY": "r", "SEARCH_TOKEN": searchToken} {
		t.Setenv(k, v)
	}
	type remote struct {
		f     *testkit.RemoteFixture
		token string
	}
	search := remote{testkit.StartRemoteFixture(t, "-http", "-name", "search", "-require-token", searchToken), searchToken}
	docs := remote{testkit.StartRemoteFixture(t, "-http", "-name", "docs", "-require-token", docsToken), docsToken}
	web := remote{testkit.StartRemoteFixture(t, "-http", "-name", "web"), ""}
	events := remote{testkit.StartRemoteFixture(t, "-sse", "-name", "events"), ""}
	addrs := map[string]string{"@SEARCH_ADDR@": search.f.Addr, "@DOCS_ADDR@": docs.f.Addr, "@HTTP_ADDR@": web.f.Addr, "@SSE_ADDR@": events.f.Addr}

	project := t.TempDir()
	notes := []string{"-name", "notes", "-tools", "add,list"}
	cases := []struct {
		name   string
		files  []string
		want   map[string][]string // backend → the fixture's args
		remote map[string]remote   // remote backend → what serves it
	}{
		{"Claude Desktop", []string{"claude_desktop_config.json"}, map[string][]string{
			"notes": notes, "My-Tasks": {"-name", "tasks", "-resources", "1"}},
			map[string]remote{"linear": events}}, // transport auto: falls back to HTTP+SSE
		{"Claude Code", []string{"claude.json"}, map[string][]string{
			"notes": notes, "notes-2": {"-name", "project-notes"}},
			map[string]remote{"search": search}},
		{"Claude Code project", []string{"project/.mcp.json"}, map[string][]string{
			"fixture": {"-name", "project", "-prompts", "review"}}, nil},
		{"Cursor", []string{"cursor/.cursor/mcp.json"}, map[string][]string{
			"fixture": {"-name", "cursor", "-resources", "2"}},
			map[string]remote{"remote": web}},
		{"VS Code", []string{"vscode/.vscode/mcp.json"}, map[string][]string{
			"fixture": {"-name", "vscode", "-tools", "add"}},
			map[string]remote{"docs": docs, "events": events}},
		{"all at once", []string{"claude_desktop_config.json", "claude.json", "vscode/.vscode/mcp.json"}, map[string][]string{
			"notes": notes, "My-Tasks": {"-name", "tasks", "-resources", "1"}, "notes-2": {"-name", "project-notes"},
			"fixture": {"-name", "vscode", "-tools", "add"}},
			map[string]remote{"linear": events, "search": search, "docs": docs, "events": events}},
	}
	secrets := []string{"ghp_16C7e42F292c6912E7710c838347Ae178B4a", "hunter2hunter2", docsToken, searchToken}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"import"}
			for _, f := range tc.files {
				args = append(args, importSampleWith(t, dir, f, project, addrs))
			}
			out := filepath.Join(dir, "out", "mcp-mux.toml")
			stdout, stderr, code := runEnv(t, dir, nil, append(args, "--output", out)...)
			if code != 0 || stdout != "" {
				t.Fatalf("import: exit %d, stdout %q\n%s", code, stdout, stderr)
			}
			for _, s := range secrets {
				if leaks(stderr, s) {
					t.Errorf("import's stderr shows a secret:\n%s", stderr)
				}
			}
			if !strings.Contains(stderr, "check: OK") {
				t.Errorf("import does not report check OK:\n%s", stderr)
			}
			if fi, err := os.Stat(out); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) { // no Unix modes on Windows
				t.Errorf("output: %v, mode %v", err, fi.Mode())
			}
			text, _ := os.ReadFile(out)
			chk, code := runCheck(t, "--config", out)
			if code != 0 {
				t.Fatalf("check: exit %d\n%s\nconfig:\n%s", code, chk, text)
			}
			for _, s := range secrets {
				if leaks(chk, s) {
					t.Errorf("check shows a secret:\n%s", chk)
				}
			}

			var want []string
			for backend, fargs := range tc.want {
				for _, tool := range fixtureTools(t, fargs...) {
					want = append(want, backend+"__"+tool)
				}
			}
			for backend, r := range tc.remote {
				for _, tool := range remoteTools(t, r.f, r.token) {
					want = append(want, backend+"__"+tool)
				}
			}
			// Every tool in the list (past tool_list_max, an agent mcp-mux
			// does not know gets the search surface instead).
			allTools(t, out)
			r := runMux(t, out)
			var got []string
			// Every page: all at once is over the mux's page size.
			for tool, err := range r.cs.Tools(context.Background(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, tool.Name)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("tools through mcp-mux:\n got %q\nwant %q\nconfig:\n%s", got, want, text)
			}
		})
	}
}

// TestImportWithoutFilesReadsTheClientsDefaultLocations: with no FILE,
// import looks where each client keeps its servers on this OS and says
// which it read and which it did not find.
func TestImportWithoutFilesReadsTheClientsDefaultLocations(t *testing.T) {
	home, proj := t.TempDir(), t.TempDir()
	cfgDir := filepath.Join(home, ".config")
	homeEnv := func(home string) []string { return []string{"HOME=" + home} }
	if runtime.GOOS == "windows" { // the clients' files are under %APPDATA% and %USERPROFILE% there
		cfgDir = filepath.Join(home, "AppData", "Roaming")
		homeEnv = func(home string) []string {
			return []string{"USERPROFILE=" + home, "APPDATA=" + filepath.Join(home, "AppData", "Roaming")}
		}
	}
	importSample(t, filepath.Join(cfgDir, "Claude"), "claude_desktop_config.json", "")
	importSample(t, proj, "project/.mcp.json", "")
	os.Rename(filepath.Join(proj, "project", ".mcp.json"), filepath.Join(proj, ".mcp.json"))

	env := append(homeEnv(home), "PATH="+os.Getenv("PATH"), "API_KEY=k")
	stdout, stderr, code := runEnv(t, proj, env, "import")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"read       " + filepath.Join(cfgDir, "Claude", "claude_desktop_config.json") + " (Claude Desktop): 4 servers",
		"not found  " + filepath.Join(home, ".claude.json") + " (Claude Code)",
		"read       " + filepath.Join(proj, ".mcp.json") + " (Claude Code): 1 server",
		"not found  " + filepath.Join(home, ".cursor", "mcp.json") + " (Cursor)",
		"not found  " + filepath.Join(proj, ".vscode", "mcp.json") + " (VS Code)",
		"not found  " + filepath.Join(cfgDir, "Code", "User", "mcp.json") + " (VS Code)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	cfg, err := config.Parse(filepath.Join(proj, "mcp-mux.toml"), []byte(stdout), func(string) (string, bool) { return "x", true })
	if err != nil {
		t.Fatalf("stdout is not a config: %v\n%s", err, stdout)
	}
	var names []string
	for _, b := range cfg.Backends {
		names = append(names, b.Name)
	}
	if want := []string{"notes", "My-Tasks", "linear", "fixture"}; !slices.Equal(names, want) {
		t.Errorf("backends %q, want %q", names, want)
	}

	// Nothing anywhere: an error, not an empty config.
	_, stderr, code = runEnv(t, t.TempDir(), homeEnv(t.TempDir()), "import")
	if code != 1 || !strings.Contains(stderr, "no MCP servers found") {
		t.Errorf("nothing to import: exit %d\n%s", code, stderr)
	}
}

// TestImportRefusesToOverwriteWithoutForce.
func TestImportRefusesToOverwriteWithoutForce(t *testing.T) {
	dir := t.TempDir()
	src := importSample(t, dir, "claude_desktop_config.json", "")
	out := filepath.Join(dir, "mine.toml")
	os.WriteFile(out, []byte("# hand-written\n"), 0o644)
	_, stderr, code := runEnv(t, dir, nil, "import", src, "--output", out)
	if data, _ := os.ReadFile(out); code != 1 || string(data) != "# hand-written\n" || !strings.Contains(stderr, "--force") {
		t.Errorf("exit %d, file %q\n%s", code, data, stderr)
	}
	_, stderr, code = runEnv(t, dir, nil, "import", "--force", "--output", out, src)
	data, _ := os.ReadFile(out)
	if fi, _ := os.Stat(out); code != 0 || !bytes.Contains(data, []byte("[[backend]]")) || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
		t.Errorf("--force: exit %d, mode %v\n%s", code, fi.Mode(), stderr)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".mcp-mux-import-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %q", leftovers)
	}
}

// TestImportPrintsTheBlockThatRegistersMcpMuxAlone: after writing, import
// prints (stderr) the entry to paste into the client: this executable with
// --config and the written file, in the client's own form, with every
// variable the config needs in its "env" (Claude Code's command: -e), set to
// a placeholder, never to a value; none when it needs none.
func TestImportPrintsTheBlockThatRegistersMcpMuxAlone(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("VSCODE_TOKEN", "v")
	t.Setenv("API_KEY", "k")
	desktop := importSample(t, dir, "claude_desktop_config.json", "")
	vscode := importSample(t, dir, "vscode/.vscode/mcp.json", "")
	claude := importSample(t, dir, "claude.json", t.TempDir())
	exe, _ := filepath.EvalSymlinks(testkit.MuxBin(t))
	type entry struct {
		Type, Command string
		Args          []string
		Env           map[string]string
	}
	block := func(stderr, after string) map[string]map[string]entry {
		i := strings.Index(stderr, after)
		if i < 0 {
			t.Fatalf("no %q in\n%s", after, stderr)
		}
		var v map[string]map[string]entry
		if err := json.NewDecoder(strings.NewReader(stderr[i+len(after):])).Decode(&v); err != nil {
			t.Fatalf("block after %q: %v\n%s", after, err, stderr)
		}
		return v
	}

	out := filepath.Join(dir, "mux.toml")
	_, stderr, code := runEnv(t, dir, nil, "import", desktop, vscode, claude, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	want := []string{"-c", out}
	env := map[string]string{"API_KEY": "YOUR_API_KEY", "SEARCH_TOKEN": "YOUR_SEARCH_TOKEN", "VSCODE_TOKEN": "YOUR_VSCODE_TOKEN"}
	if e := block(stderr, `Claude Desktop, Claude Code ("mcpServers"):`)["mcpServers"]["mcp-mux"]; e.Command != exe || !slices.Equal(e.Args, want) || !maps.Equal(e.Env, env) {
		t.Errorf("Claude Desktop block: %+v", e)
	}
	if e := block(stderr, `VS Code ("servers", in its mcp.json):`)["servers"]["mcp-mux"]; e.Type != "stdio" || e.Command != exe || !slices.Equal(e.Args, want) || !maps.Equal(e.Env, env) {
		t.Errorf("VS Code block: %+v", e)
	}
	// -e takes every word up to the next option: the name goes first.
	add := "claude mcp add --scope user mcp-mux -e API_KEY=YOUR_API_KEY -e SEARCH_TOKEN=YOUR_SEARCH_TOKEN -e VSCODE_TOKEN=YOUR_VSCODE_TOKEN -- " + exe + " -c " + out + "\n"
	if !strings.Contains(stderr, add) {
		t.Errorf("no %q in\n%s", add, stderr)
	}
	if !strings.Contains(stderr, "API_KEY, SEARCH_TOKEN, VSCODE_TOKEN") || strings.Contains(stderr, `"v"`) {
		t.Errorf("the variables to give mcp-mux are not named, or a value is shown:\n%s", stderr)
	}

	// Nothing to set: no "env", no -e.
	out = filepath.Join(dir, "desktop.toml")
	_, stderr, code = runEnv(t, dir, nil, "import", desktop, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if e := block(stderr, `Claude Desktop ("mcpServers"):`)["mcpServers"]["mcp-mux"]; e.Command != exe || e.Env != nil || strings.Contains(stderr, "YOUR_") {
		t.Errorf("Claude Desktop block without variables: %+v\n%s", e, stderr)
	}
}

// TestImportCarriesClaudeCodePermissionRulesOver: importing Claude Code's
// servers, import prints each of its permission rules for them (the user's
// settings, and the projects') with the rule that matches the same tools
// through mcp-mux; with no rules, how a rule is rewritten; and how to keep
// the names short. Importing no Claude Code server, it says nothing of it.
func TestImportCarriesClaudeCodePermissionRulesOver(t *testing.T) {
	dir, home, project := t.TempDir(), t.TempDir(), t.TempDir()
	src := importSample(t, dir, "claude.json", project)
	// USERPROFILE: the home on Windows.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "USERPROFILE=" + home, "SEARCH_TOKEN=s"}
	short := `To keep the names short, give a [[backend]] a shorter prefix (by default, its name) and write the rules with it: prefix = "n" gives mcp__mcp-mux__n__TOOL; prefix = "" gives mcp__mcp-mux__TOOL`

	_, stderr, code := runEnv(t, dir, env, "import", src, "-o", filepath.Join(dir, "a.toml"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"through mcp-mux they are mcp__mcp-mux__BACKEND__TOOL",
		"No rule for them was found in Claude Code's settings (" + filepath.Join(home, ".claude", "settings.json"),
		"  mcp__notes__TOOL → mcp__mcp-mux__notes__TOOL, mcp__notes → mcp__mcp-mux__notes__*\n",
		"  mcp__notes__TOOL → mcp__mcp-mux__notes-2__TOOL, mcp__notes → mcp__mcp-mux__notes-2__* (project " + project + ")\n",
		"  mcp__search__TOOL → mcp__mcp-mux__search__TOOL, mcp__search → mcp__mcp-mux__search__* (project " + project + ")\n",
		short,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"permissions": {
  "allow": ["mcp__notes__add", "mcp__search", "Bash(ls)", "mcp__github__x"],
  "deny": ["mcp__notes__list"]}}`), 0o644)
	os.MkdirAll(filepath.Join(project, ".claude"), 0o755)
	os.WriteFile(filepath.Join(project, ".claude", "settings.local.json"), []byte(`{"permissions": {"ask": ["mcp__notes__add"]}}`), 0o644)
	_, stderr, code = runEnv(t, dir, env, "import", src, "-o", filepath.Join(dir, "b.toml"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	want := "Add these rules to the same lists to carry them over:\n" +
		"  " + filepath.Join(home, ".claude", "settings.json") + ":\n" +
		"    allow  mcp__notes__add → mcp__mcp-mux__notes__add, mcp__mcp-mux__notes-2__add\n" +
		"    allow  mcp__search → mcp__mcp-mux__search__*\n" +
		"    deny   mcp__notes__list → mcp__mcp-mux__notes__list, mcp__mcp-mux__notes-2__list\n" +
		"  " + filepath.Join(project, ".claude", "settings.local.json") + ":\n" +
		"    ask    mcp__notes__add → mcp__mcp-mux__notes-2__add\n" +
		short
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks\n%s\nin:\n%s", want, stderr)
	}

	desktop := importSample(t, dir, "claude_desktop_config.json", "")
	_, stderr, code = runEnv(t, dir, env, "import", desktop, "-o", filepath.Join(dir, "c.toml"))
	if code != 0 || strings.Contains(stderr, "mcp__") {
		t.Errorf("Claude Desktop alone: exit %d\n%s", code, stderr)
	}
}

// TestImportReportNamesTheFileOfEachProblem: what check finds in the
// written config is reported as check reports it, FILE:LINE: key: message,
// with the --output file, and the backend counted from 1; when the config
// went to stdout there is no file yet, and the line is the printed
// config's.
func TestImportReportNamesTheFileOfEachProblem(t *testing.T) {
	dir := t.TempDir()
	src := importSample(t, dir, "claude.json", t.TempDir())
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()} // SEARCH_TOKEN is not set
	out := filepath.Join(dir, "out.toml")
	_, stderr, code := runEnv(t, dir, env, "import", src, "--output", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	text, _ := os.ReadFile(out)
	line := 1 + strings.Count(string(text[:strings.Index(string(text), "Authorization = ")]), "\n")
	want := fmt.Sprintf("  %s:%d: backend #3 (search).headers.Authorization: ${SEARCH_TOKEN} is not set", out, line)
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	stdout, stderr, code := runEnv(t, dir, env, "import", src)
	if code != 0 || stdout != string(text) {
		t.Fatalf("exit %d, stdout differs from the --output file\n%s", code, stderr)
	}
	want = fmt.Sprintf("(lines of the config printed above):\n  line %d: backend #3 (search).headers.Authorization: ${SEARCH_TOKEN} is not set", line)
	if !strings.Contains(stderr, want) || strings.Contains(stderr, "mcp-mux.toml:") {
		t.Errorf("stderr lacks %q, or names a file that does not exist:\n%s", want, stderr)
	}
}

// TestInitWritesAStarterThatPassesCheckAndNeverOverwrites.
func TestInitWritesAStarterThatPassesCheckAndNeverOverwrites(t *testing.T) {
	bin := t.TempDir()
	npx := "npx"
	if runtime.GOOS == "windows" {
		npx = "npx.cmd" // as it is there
	}
	os.WriteFile(filepath.Join(bin, npx), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	xdg := t.TempDir()
	env := []string{"PATH=" + bin, "XDG_CONFIG_HOME=" + xdg, "HOME=" + t.TempDir()}
	if runtime.GOOS == "windows" { // the user config is %APPDATA%\mcp-mux\config.toml there
		env = append(env, "APPDATA="+xdg, "USERPROFILE="+t.TempDir())
	}
	path := filepath.Join(xdg, "mcp-mux", "config.toml")

	_, stderr, code := runEnv(t, "", env, "init")
	if code != 0 || !strings.Contains(stderr, "wrote "+path) || !strings.Contains(stderr, "mcp-mux import") {
		t.Fatalf("init: exit %d\n%s", code, stderr)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if out, code := runEnv3(t, env, "check", "--config", path); code != 0 {
		t.Errorf("check of the starter: exit %d\n%s", code, out)
	}

	os.WriteFile(path, append(first, "# edited\n"...), 0o600)
	_, stderr, code = runEnv(t, "", env, "init")
	if data, _ := os.ReadFile(path); code != 1 || !strings.Contains(stderr, "already exists") || !bytes.HasSuffix(data, []byte("# edited\n")) {
		t.Errorf("second init: exit %d\n%s", code, stderr)
	}

	other := filepath.Join(t.TempDir(), "sub", "other.toml")
	if _, stderr, code := runEnv(t, "", env, "init", "--output", other); code != 0 {
		t.Errorf("init --output: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(other); err != nil {
		t.Error(err)
	}

	// With neither npx nor uvx, the starter says what to install.
	env[0] = "PATH=" + t.TempDir()
	other = filepath.Join(t.TempDir(), "c.toml")
	if _, stderr, code := runEnv(t, "", env, "init", "-o", other); code != 0 || !strings.Contains(stderr, "Neither uvx nor npx") {
		t.Errorf("init without runners: exit %d\n%s", code, stderr)
	}
}

// runEnv3 is runEnv with stdout and stderr together.
func runEnv3(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	stdout, stderr, code := runEnv(t, "", env, args...)
	return stdout + stderr, code
}

// TestJSONClientConfigAsConfigNamesTheImportCommand: passing a client's
// JSON file as mcp-mux's config gets the command that converts it.
func TestJSONClientConfigAsConfigNamesTheImportCommand(t *testing.T) {
	src := importSample(t, t.TempDir(), "claude_desktop_config.json", "")
	for _, args := range [][]string{{"check", "--config", src}, {"--config", src}} {
		stdout, stderr, code := runEnv(t, "", nil, args...)
		all := stdout + stderr
		if code != 1 || !strings.Contains(all, "is a JSON client config") || !strings.Contains(all, "mcp-mux import "+src) || strings.Contains(all, "syntax error") {
			t.Errorf("%v: exit %d\n%s", args, code, all)
		}
		if leaks(all, "ghp_16C7e42F292c6912E7710c838347Ae178B4a") {
			t.Errorf("%v shows a secret:\n%s", args, all)
		}
	}
}

// allTools makes the config at path give every agent every tool
// (tool_list = "all"), in its [mux] table or a new one.
func allTools(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	if strings.Contains(src, "\n[mux]\n") || strings.HasPrefix(src, "[mux]\n") {
		src = strings.Replace(src, "[mux]\n", "[mux]\ntool_list = \"all\"\n", 1)
	} else {
		src = "[mux]\ntool_list = \"all\"\n\n" + src
	}
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}
