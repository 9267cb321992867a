package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/mcp-mux/mcp-mux/mux/clientimport"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// End-to-end tests of `mcp-mux import --apply` and `--undo`: real client
// files (testdata/import/apply) in a temporary home, moved over by the
// binary, and put back.

// applyHome is a home directory with every client's file of
// testdata/import/apply where the clients keep them, and a project.
type applyHome struct {
	home, project, cfgDir string
	bin                   string // the mcp-mux binary it runs, not named mcp-mux
	env                   []string
	files                 map[string]string // what → path
	orig                  map[string][]byte
	modes                 map[string]os.FileMode
}

func newApplyHome(t *testing.T) *applyHome {
	t.Helper()
	h := &applyHome{home: t.TempDir(), files: map[string]string{}, orig: map[string][]byte{}, modes: map[string]os.FileMode{}}
	h.project = filepath.Join(h.home, "src", "my app")
	os.MkdirAll(h.project, 0o755)
	h.cfgDir = filepath.Join(h.home, ".config")
	h.env = []string{"HOME=" + h.home}
	switch runtime.GOOS {
	case "windows":
		h.cfgDir = filepath.Join(h.home, "AppData", "Roaming")
		h.env = []string{"USERPROFILE=" + h.home, "APPDATA=" + h.cfgDir}
	case "darwin":
		h.cfgDir = filepath.Join(h.home, "Library", "Application Support")
	}
	// The temporary directory is one of its own: mcp-mux refuses to write
	// a binary under it into the clients (a go run build), and the
	// binaries the tests run are under the test's.
	tmp := t.TempDir()
	h.env = append(h.env, "PATH="+os.Getenv("PATH"), "TMPDIR="+tmp, "TMP="+tmp, "TEMP="+tmp)
	// Installed under another name, as by `go build -o mm`: its own
	// entries must still be known by its path.
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe"
	}
	h.bin = filepath.Join(t.TempDir(), "mm"+exe)
	bin, err := os.ReadFile(testkit.MuxBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.bin, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	quoted := func(s string) []byte {
		b, _ := json.Marshal(s)
		return b[1 : len(b)-1]
	}
	put := func(what, src, dst string, mode os.FileMode) {
		data, err := os.ReadFile(filepath.Join("../../testdata/import/apply", src))
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("@FIXTURE@"), quoted(testkit.FixtureBin(t)))
		data = bytes.ReplaceAll(data, []byte("@PROJECT@"), quoted(h.project))
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := os.WriteFile(dst, data, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dst, mode)
		h.files[what], h.orig[what], h.modes[what] = dst, data, mode
	}
	put("desktop", "claude_desktop_config.json", filepath.Join(h.cfgDir, "Claude", "claude_desktop_config.json"), 0o644)
	put("claude", "claude.json", filepath.Join(h.home, ".claude.json"), 0o600)
	put("mcp.json", "mcp.json", filepath.Join(h.project, ".mcp.json"), 0o644)
	put("cursor", "cursor.json", filepath.Join(h.home, ".cursor", "mcp.json"), 0o640)
	put("vscode", "vscode.json", filepath.Join(h.cfgDir, "Code", "User", "mcp.json"), 0o644)
	put("settings", "settings.json", filepath.Join(h.home, ".claude", "settings.json"), 0o644)
	put("project settings", "project_settings.local.json", filepath.Join(h.project, ".claude", "settings.local.json"), 0o644)
	return h
}

func (h *applyHome) config() string {
	if runtime.GOOS == "windows" {
		return filepath.Join(h.cfgDir, "mcp-mux", "config.toml")
	}
	return filepath.Join(h.home, ".config", "mcp-mux", "config.toml")
}

func (h *applyHome) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	stdout, stderr, code := runBinEnv(t, h.bin, h.project, h.env, args...)
	if leaks(stdout+stderr, "ghp_16C7e42F292c6912E7710c838347Ae178B4a") {
		t.Errorf("mcp-mux %v shows a secret:\n%s%s", args, stdout, stderr)
	}
	return stdout + stderr, code
}

// age sets every file under the home an hour back, so that a rewrite
// shows in its modification time however coarse the file system's clock.
func (h *applyHome) age(t *testing.T) {
	t.Helper()
	past := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(h.home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		return os.Chtimes(p, past, past)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot is every file's bytes and modification time (the config's
// and --undo's record of the last --apply too), and their backups.
func (h *applyHome) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	state := func(p string) string {
		data, err := os.ReadFile(p)
		fi, err2 := os.Stat(p)
		if err != nil || err2 != nil {
			return fmt.Sprint(err, err2)
		}
		return string(data) + "\x00" + fi.ModTime().String()
	}
	for what, p := range h.files {
		out[what] = state(p)
		backups, _ := filepath.Glob(p + ".mcp-mux-backup-*")
		out[what+" backups"] = strings.Join(backups, " ")
	}
	out["config"] = state(h.config())
	backups, _ := filepath.Glob(h.config() + ".mcp-mux-backup-*")
	out["config backups"] = strings.Join(backups, " ")
	out["undo record"] = state(filepath.Join(filepath.Dir(h.config()), "import-undo.json"))
	return out
}

// muxEntry is mcp-mux's entry as --apply writes it in a client's file.
func muxEntry(t *testing.T, path string, data []byte) clientimport.Server {
	t.Helper()
	f, err := clientimport.Read(path, data, clientimport.Options{})
	if err != nil {
		t.Fatalf("%s does not parse after --apply: %v\n%s", path, err, data)
	}
	for _, s := range f.Servers {
		if s.Name == "mcp-mux" {
			return s
		}
	}
	t.Fatalf("%s has no mcp-mux entry:\n%s", path, data)
	return clientimport.Server{}
}

// TestImportApplyMovesEachClientAndUndoPutsThemBack: --apply on Claude
// Desktop's config, ~/.claude.json (the user's and a project's servers),
// Cursor's and VS Code's JSONC files and Claude Code's settings changes
// only the servers (and adds the rules), keeps every other byte, saves
// each file with its mode, writes one profile per client; a project's
// .mcp.json, shared, is left as it is; in Claude Code, the project's
// servers get an entry of their own beside the user's, as Claude Code
// runs both there; a second run changes nothing; --undo puts every byte
// back.
func TestImportApplyMovesEachClientAndUndoPutsThemBack(t *testing.T) {
	h := newApplyHome(t)
	out, code := h.run(t, "import", "--apply")
	if code != 0 {
		t.Fatalf("--apply: exit %d\n%s", code, out)
	}
	exe, _ := filepath.EvalSymlinks(h.bin)
	cfg := h.config()
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	read := func(what string) []byte {
		data, err := os.ReadFile(h.files[what])
		if err != nil {
			t.Fatal(err)
		}
		return data
	}

	// Cursor and VS Code: the whole file, comments, trailing commas and
	// tabs as they were; the servers' comments inside them gone with them.
	// Cursor's search server had ${env:SEARCH_KEY}: mcp-mux gets it so.
	wantCursor := "{\n  // Cursor's own servers.\n  \"mcpServers\": {\n    \"mcp-mux\": {\n      \"command\": " + q(exe) + ",\n      \"args\": [\n        \"-c\",\n        " + q(cfg) +
		",\n        \"--profile\",\n        \"cursor\"\n      ],\n      \"env\": {\n        \"SEARCH_KEY\": \"${env:SEARCH_KEY}\"\n      }\n    },\n    /* \"old\": {\"command\": \"x\"}, */\n  },\n}\n"
	if got := string(read("cursor")); got != wantCursor {
		t.Errorf("Cursor's file:\n%s\nwant\n%s", got, wantCursor)
	}
	wantVSCode := "{\n\t// servers VS Code starts\n\t\"servers\": {\n\t\t\"mcp-mux\": {\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": " + q(exe) + ",\n\t\t\t\"args\": [\n\t\t\t\t\"-c\",\n\t\t\t\t" + q(cfg) +
		",\n\t\t\t\t\"--profile\",\n\t\t\t\t\"vscode\"\n\t\t\t]\n\t\t},\n\t\t// docs, over HTTP\n\t},\n\t/* nothing to ask */\n\t\"inputs\": [],\n}\n"
	if got := string(read("vscode")); got != wantVSCode {
		t.Errorf("VS Code's file:\n%s\nwant\n%s", got, wantVSCode)
	}

	// Claude Desktop: the server mcp-mux cannot run stays; the bytes
	// around the servers are the same.
	desktop := read("desktop")
	if e := muxEntry(t, h.files["desktop"], desktop); e.Command != exe || !slices.Equal(e.Args, []string{"-c", cfg, "--profile", "claude-desktop"}) {
		t.Errorf("Claude Desktop's entry: %s %q", e.Command, e.Args)
	}
	var d struct{ McpServers map[string]json.RawMessage }
	json.Unmarshal(desktop, &d)
	if len(d.McpServers) != 2 || d.McpServers["dev-server"] == nil {
		t.Errorf("Claude Desktop's servers: %s", desktop)
	}
	splicedOnly(t, "Claude Desktop", h.orig["desktop"], desktop, "\"mcpServers\": {\n", "\n  },\n  \"preferences\"")

	// ~/.claude.json: the user's and the project's servers are replaced,
	// the gone project's stay, every other key is as it was.
	claude := read("claude")
	var before, after map[string]json.RawMessage
	json.Unmarshal(h.orig["claude"], &before)
	if err := json.Unmarshal(claude, &after); err != nil {
		t.Fatalf("~/.claude.json is not JSON: %v\n%s", err, claude)
	}
	for k, v := range before {
		if k != "mcpServers" && k != "projects" && !bytes.Equal(v, after[k]) {
			t.Errorf("~/.claude.json: %s was %s, is %s", k, v, after[k])
		}
	}
	var projects map[string]map[string]json.RawMessage
	json.Unmarshal(after["projects"], &projects)
	if !strings.Contains(string(projects["/nonexistent/old-project"]["mcpServers"]), `"old"`) {
		t.Errorf("the gone project's server was moved:\n%s", claude)
	}
	if string(projects[h.project]["history"]) != `[{"display": "fix the build", "pastedContents": {}}]` || string(projects[h.project]["hasTrustDialogAccepted"]) != "true" {
		t.Errorf("the project's other keys changed:\n%s", claude)
	}
	splicedOnly(t, "~/.claude.json", h.orig["claude"], claude, "\"mcpServers\": {\n", "\n      },\n      \"enabledMcpjsonServers\"")
	// The user's servers: mcp-mux with the user's profile; the project's
	// (local scope): their own entry and profile, as Claude Code runs the
	// user's servers in the project too, and one server per name; that
	// entry names itself, as Claude Code puts its name in the tools'.
	wantUser := "{\n    \"mcp-mux\": {\n      \"command\": " + q(exe) + ",\n      \"args\": [\n        \"-c\",\n        " + q(cfg) + ",\n        \"--profile\",\n        \"claude-code\"\n      ]\n    }\n  }"
	if got := string(after["mcpServers"]); got != wantUser {
		t.Errorf("~/.claude.json's mcpServers:\n%s\nwant\n%s", got, wantUser)
	}
	wantLocal := "{\n        \"mcp-mux-my-app\": {\n          \"command\": " + q(exe) + ",\n          \"args\": [\n            \"-c\",\n            " + q(cfg) + ",\n            \"--profile\",\n            \"claude-code-my-app\",\n            \"--name\",\n            \"mcp-mux-my-app\"\n          ]\n        }\n      }"
	if got := string(projects[h.project]["mcpServers"]); got != wantLocal {
		t.Errorf("~/.claude.json's project mcpServers:\n%s\nwant\n%s", got, wantLocal)
	}

	// The project's .mcp.json is shared with the project's other users:
	// this machine's paths stay out of it.
	if got := read("mcp.json"); !bytes.Equal(got, h.orig["mcp.json"]) {
		t.Errorf(".mcp.json changed:\n%s", got)
	}
	if !strings.Contains(out, "left alone "+h.files["mcp.json"]+": a project's .mcp.json is shared with the project's other users") {
		t.Errorf("--apply does not say why it left .mcp.json alone:\n%s", out)
	}

	// Claude Code's rules, carried over in the list they are in, to the
	// entry that runs each server; those of .mcp.json's servers, which
	// still run directly, stay as they are.
	wantSettings := strings.Replace(string(h.orig["settings"]), `      "mcp__mem"`, `      "mcp__mem",
      "mcp__mcp-mux__notes__list",
      "mcp__mcp-mux__mem__*"`, 1)
	if got := string(read("settings")); got != wantSettings {
		t.Errorf("settings.json:\n%s\nwant\n%s", got, wantSettings)
	}
	wantLocalSettings := strings.Replace(strings.Replace(string(h.orig["project settings"]), `      "mcp__lint__check"`, `      "mcp__lint__check",
      "mcp__mcp-mux-my-app__db__*"`, 1), `      "mcp__notes__delete"`, `      "mcp__notes__delete",
      "mcp__mcp-mux__notes__delete"`, 1)
	if got := string(read("project settings")); got != wantLocalSettings {
		t.Errorf("the project's settings.local.json:\n%s\nwant\n%s", got, wantLocalSettings)
	}

	// The config: every server once, a profile per client and project.
	var doc struct {
		Backend []struct{ Name string }
		Profile map[string]struct{ Backends, Clients []string }
	}
	cfgData, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := toml.Decode(string(cfgData), &doc); err != nil {
		t.Fatalf("the config is not TOML: %v\n%s", err, cfgData)
	}
	var names []string
	for _, b := range doc.Backend {
		names = append(names, b.Name)
	}
	if want := []string{"notes", "tasks", "mem", "db", "browser", "search", "fixture", "docs"}; !slices.Equal(names, want) {
		t.Errorf("backends %q, want %q", names, want)
	}
	wantProfiles := map[string][2][]string{
		"claude-desktop":     {{"notes", "tasks"}, {"claude-ai"}},
		"claude-code":        {{"notes", "mem"}, {"claude-code"}},
		"claude-code-my-app": {{"db"}, nil},
		"cursor":             {{"browser", "search"}, {"cursor*"}},
		"vscode":             {{"fixture", "docs"}, {"Visual Studio Code*"}},
	}
	if len(doc.Profile) != len(wantProfiles) {
		t.Errorf("profiles %v", doc.Profile)
	}
	for name, w := range wantProfiles {
		if p := doc.Profile[name]; !slices.Equal(p.Backends, w[0]) || !slices.Equal(p.Clients, w[1]) {
			t.Errorf("profile %s: %+v, want %q", name, p, w)
		}
	}
	if fi, err := os.Stat(cfg); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
		t.Errorf("config: %v %v", fi.Mode(), err)
	}

	// Each file saved beside it as it was, with its mode.
	for what, path := range h.files {
		backups, _ := filepath.Glob(path + ".mcp-mux-backup-*")
		if what == "mcp.json" {
			if len(backups) != 0 || strings.Contains(out, "changed    "+path) {
				t.Errorf("%s: backups %q\n%s", what, backups, out)
			}
			continue
		}
		if len(backups) != 1 {
			t.Errorf("%s: backups %q", what, backups)
			continue
		}
		data, _ := os.ReadFile(backups[0])
		fi, _ := os.Stat(backups[0])
		if !bytes.Equal(data, h.orig[what]) || (runtime.GOOS != "windows" && fi.Mode().Perm() != h.modes[what]) {
			t.Errorf("%s: backup %s differs (mode %v, want %v)", what, backups[0], fi.Mode(), h.modes[what])
		}
		if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != h.modes[what] {
			t.Errorf("%s: mode %v, want %v", what, fi.Mode(), h.modes[what])
		}
		if !strings.Contains(out, "changed    "+path+": ") {
			t.Errorf("--apply does not say it changed %s:\n%s", path, out)
		}
	}
	if !strings.Contains(out, `kept       "dev-server" in `+h.files["desktop"]) || !strings.Contains(out, "wrote      "+cfg) {
		t.Errorf("--apply output:\n%s", out)
	}

	// Again: nothing to do, nothing touched. The entries --apply wrote
	// launch this mcp-mux: they are its own, never imported.
	h.age(t)
	snap := h.snapshot(t)
	out, code = h.run(t, "import", "--apply")
	if code != 0 || !strings.Contains(out, "nothing to move") || !strings.Contains(out, `skipped    "mcp-mux" in `+h.files["cursor"]+": mcp-mux's own entry") {
		t.Errorf("second --apply: exit %d\n%s", code, out)
	}
	for what, v := range h.snapshot(t) {
		if v != snap[what] {
			t.Errorf("second --apply changed %s:\n%s\nwas\n%s\noutput:\n%s", what, v, snap[what], out)
		}
	}
	// Nor by plain import, which prints a config.
	stdout, stderr, code := runBinEnv(t, h.bin, h.project, h.env, "import")
	if code != 0 || strings.Contains(stdout, `name = "mcp-mux`) || !strings.Contains(stderr, `skipped    "mcp-mux" in `+h.files["vscode"]+": mcp-mux's own entry") {
		t.Errorf("import after --apply: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// --undo: every byte and mode back, the config it created gone, and
	// the saved copies, useless now.
	out, code = h.run(t, "import", "--undo")
	if code != 0 {
		t.Fatalf("--undo: exit %d\n%s", code, out)
	}
	for what, path := range h.files {
		data, _ := os.ReadFile(path)
		fi, _ := os.Stat(path)
		if !bytes.Equal(data, h.orig[what]) || (runtime.GOOS != "windows" && fi.Mode().Perm() != h.modes[what]) {
			t.Errorf("%s after --undo (mode %v):\n%s", what, fi.Mode(), data)
		}
		if what == "mcp.json" {
			continue
		}
		if !strings.Contains(out, "restored   "+path+"\n") {
			t.Errorf("--undo does not say it restored %s:\n%s", path, out)
		}
	}
	if _, err := os.Stat(cfg); !os.IsNotExist(err) || !strings.Contains(out, "removed    "+cfg) {
		t.Errorf("the config --apply created is still there (%v):\n%s", err, out)
	}
	if b := backupsUnder(t, h.home); len(b) != 0 {
		t.Errorf("saved copies left: %q", b)
	}
	if out, code := h.run(t, "import", "--undo"); code != 1 || !strings.Contains(out, "nothing to undo") {
		t.Errorf("second --undo: exit %d\n%s", code, out)
	}
}

// splicedOnly checks that got is orig up to the end of its first before
// and from its last after: only what is between them changed.
func splicedOnly(t *testing.T, what string, orig, got []byte, before, after string) {
	t.Helper()
	i, j := bytes.Index(orig, []byte(before)), bytes.LastIndex(orig, []byte(after))
	if i < 0 || j < 0 {
		t.Fatalf("%s: the sample lacks %q or %q", what, before, after)
	}
	head, tail := orig[:i+len(before)], orig[j:]
	if !bytes.HasPrefix(got, head) || !bytes.HasSuffix(got, tail) {
		t.Errorf("%s: changed outside its servers:\n%s", what, got)
	}
}

// TestImportApplyLeavesABrokenFileAlone: a client's file that does not
// parse is said so and left as it is, without a backup; the others move.
// A second --apply moves nothing the first did not.
func TestImportApplyLeavesABrokenFileAlone(t *testing.T) {
	h := newApplyHome(t)
	broken := []byte("{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"x\"\n  }\n")
	os.WriteFile(h.files["cursor"], broken, 0o640)
	out, code := h.run(t, "import", "--apply")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if data, _ := os.ReadFile(h.files["cursor"]); !bytes.Equal(data, broken) {
		t.Errorf("the broken file changed:\n%s", data)
	}
	if b, _ := filepath.Glob(h.files["cursor"] + ".mcp-mux-backup-*"); len(b) != 0 || !strings.Contains(out, "not read   "+h.files["cursor"]) {
		t.Errorf("backups %q; output:\n%s", b, out)
	}
	if data, _ := os.ReadFile(h.files["vscode"]); bytes.Equal(data, h.orig["vscode"]) {
		t.Error("VS Code's file was not moved over")
	}

	// Named on the command line, it stops --apply before anything changes.
	snap := h.snapshot(t)
	out, code = h.run(t, "import", "--apply", h.files["cursor"], h.files["desktop"])
	if code != 1 || !strings.Contains(out, h.files["cursor"]) {
		t.Errorf("exit %d\n%s", code, out)
	}
	for what, v := range h.snapshot(t) {
		if v != snap[what] {
			t.Errorf("%s changed", what)
		}
	}
}

// TestImportApplyPassesTheClientsVariablesToMcpMux: a variable the moved
// servers had from their client (VS Code's ${input:ID}, which VS Code
// asks the user for; Cursor's ${env:NAME}) is in the "env" of mcp-mux's
// entry there, written as the client wrote it, so that mcp-mux has what
// the backends need: VS Code keeps asking, and check passes with what
// the clients give.
func TestImportApplyPassesTheClientsVariablesToMcpMux(t *testing.T) {
	h := newApplyHome(t)
	fixture, _ := json.Marshal(testkit.FixtureBin(t))
	vscode := `{
  "inputs": [{"type": "promptString", "id": "gh-token", "description": "GitHub token", "password": true}],
  "servers": {
    "github": {"type": "stdio", "command": ` + string(fixture) + `, "args": ["-name", "github"], "env": {"GITHUB_TOKEN": "${input:gh-token}"}}
  }
}
`
	os.WriteFile(h.files["vscode"], []byte(vscode), 0o644)
	out, code := h.run(t, "import", "--apply")
	if code != 0 {
		t.Fatalf("--apply: exit %d\n%s", code, out)
	}
	for what, want := range map[string]string{
		"vscode":  `"GH_TOKEN": "${input:gh-token}"`,
		"cursor":  `"SEARCH_KEY": "${env:SEARCH_KEY}"`,
		"desktop": "",
		"claude":  "",
	} {
		data, _ := os.ReadFile(h.files[what])
		e := muxEntry(t, h.files[what], data)
		if want == "" && len(e.Env) > 0 || want != "" && (len(e.Env) != 1 || !strings.Contains(string(data), want)) {
			t.Errorf("%s's entry: env %q, want %s\n%s", what, e.Env, want, data)
		}
	}
	if data, _ := os.ReadFile(h.files["vscode"]); !strings.Contains(string(data), `"id": "gh-token"`) {
		t.Errorf("VS Code's inputs are gone:\n%s", data)
	}
	// With what VS Code and Cursor give mcp-mux, the config passes check.
	if out, code := runEnv3(t, append(slices.Clone(h.env), "GH_TOKEN=t0k", "SEARCH_KEY=k"), "check", "--config", h.config()); code != 0 {
		t.Errorf("check: exit %d\n%s", code, out)
	}
}

// TestImportApplyWithNoClientFilesSaysNoServersFound: on a machine where
// no client keeps MCP servers, --apply says so as import does, and fails.
func TestImportApplyWithNoClientFilesSaysNoServersFound(t *testing.T) {
	home := t.TempDir()
	tmp := t.TempDir() // not the binary's
	env := []string{"HOME=" + home, "USERPROFILE=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp, "TMP=" + tmp, "TEMP=" + tmp}
	_, stderr, code := runEnv(t, t.TempDir(), env, "import", "--apply")
	if code != 1 || !strings.Contains(stderr, "no MCP servers found") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("written in the home: %v", entries)
	}
}
