package e2e

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/clientimport"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// End-to-end tests of `mcp-mux import --undo` on files that changed since
// --apply: by the clients themselves, which rewrite their files, and by
// the user.

// edit replaces old, which must be in the file of what, with new.
func (h *applyHome) edit(t *testing.T, what, old, new string) {
	t.Helper()
	data, err := os.ReadFile(h.files[what])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s lacks %q:\n%s", what, old, data)
	}
	if err := os.WriteFile(h.files[what], bytes.Replace(data, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

// serverNames are the names of the servers of a client's file, in order.
func serverNames(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := clientimport.Read(path, data, clientimport.Options{})
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	var names []string
	for _, s := range f.Servers {
		names = append(names, s.Name)
	}
	return names
}

// backupsUnder lists the files --apply saved under dir.
func backupsUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".mcp-mux-backup-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestImportUndoTakesBackOnlyWhatApplyChanged: Claude Code rewrites
// ~/.claude.json on every start, and the user adds a server to Cursor's
// file and a rule to Claude Code's settings after --apply; --undo still
// puts every server and rule back as it was, keeping what changed since
// around them, and leaves neither the config nor a saved copy behind.
func TestImportUndoTakesBackOnlyWhatApplyChanged(t *testing.T) {
	h := newApplyHome(t)
	if out, code := h.run(t, "import", "--apply"); code != 0 {
		t.Fatalf("--apply: exit %d\n%s", code, out)
	}
	// Claude Code starts: its counter and the project's state change.
	h.edit(t, "claude", `"numStartups": 42`, `"numStartups": 43`)
	h.edit(t, "claude", `"hasTrustDialogAccepted": true`, `"hasTrustDialogAccepted": true,
      "lastSessionId": "5d1c"`)
	// A server of the user's own in Cursor, beside mcp-mux's entry.
	fixture, _ := json.Marshal(testkit.FixtureBin(t))
	mine := `"mine": {"command": ` + string(fixture) + `, "args": ["-name", "mine"]},`
	h.edit(t, "cursor", `    /* "old"`, "    "+mine+"\n    /* \"old\"")
	// A rule of the user's own after those --apply added.
	h.edit(t, "settings", `      "mcp__mcp-mux__mem__*"`, `      "mcp__mcp-mux__mem__*",
      "mcp__mine__get"`)

	out, code := h.run(t, "import", "--undo")
	if code != 0 {
		t.Fatalf("--undo: exit %d\n%s", code, out)
	}
	wantClaude := strings.Replace(strings.Replace(string(h.orig["claude"]), `"numStartups": 42`, `"numStartups": 43`, 1),
		`"hasTrustDialogAccepted": true`, `"hasTrustDialogAccepted": true,
      "lastSessionId": "5d1c"`, 1)
	if got, _ := os.ReadFile(h.files["claude"]); string(got) != wantClaude {
		t.Errorf("~/.claude.json after --undo:\n%s\nwant\n%s", got, wantClaude)
	}
	cursor, _ := os.ReadFile(h.files["cursor"])
	if got := serverNames(t, h.files["cursor"]); !slices.Equal(got, []string{"browser", "search", "mine"}) {
		t.Errorf("Cursor's servers after --undo: %q\n%s", got, cursor)
	}
	browser := string(h.orig["cursor"][bytes.Index(h.orig["cursor"], []byte(`"browser"`)):bytes.Index(h.orig["cursor"], []byte(`/* "old"`))])
	if !strings.Contains(string(cursor), browser) || !strings.Contains(string(cursor), mine) {
		t.Errorf("Cursor's file after --undo lacks its entries as written:\n%s", cursor)
	}
	wantSettings := strings.Replace(string(h.orig["settings"]), `      "mcp__mem"`, `      "mcp__mem",
      "mcp__mine__get"`, 1)
	if got, _ := os.ReadFile(h.files["settings"]); string(got) != wantSettings {
		t.Errorf("settings.json after --undo:\n%s\nwant\n%s", got, wantSettings)
	}
	for _, what := range []string{"desktop", "vscode", "project settings", "mcp.json"} {
		if got, _ := os.ReadFile(h.files[what]); !bytes.Equal(got, h.orig[what]) {
			t.Errorf("%s after --undo:\n%s", what, got)
		}
	}
	if _, err := os.Stat(h.config()); !os.IsNotExist(err) {
		t.Errorf("the config --apply created is still there (%v):\n%s", err, out)
	}
	if b := backupsUnder(t, h.home); len(b) != 0 {
		t.Errorf("saved copies left after a clean --undo: %q\n%s", b, out)
	}
}

// TestImportUndoKeepsTheConfigAClientStillRuns: a file whose mcp-mux
// entry the user changed since --apply is left alone by --undo, and so is
// the config that entry runs mcp-mux with, which still starts; --undo
// --force is refused. Once the entry is as --apply wrote it again,
// --undo finishes the job.
func TestImportUndoKeepsTheConfigAClientStillRuns(t *testing.T) {
	h := newApplyHome(t)
	if out, code := h.run(t, "import", "--apply"); code != 0 {
		t.Fatalf("--apply: exit %d\n%s", code, out)
	}
	applied, _ := os.ReadFile(h.files["cursor"])
	h.edit(t, "cursor", `"args": [`, "\"timeout\": 60000,\n      \"args\": [")

	for _, args := range [][]string{{"import", "--undo"}, {"import", "--undo", "--force"}} {
		out, code := h.run(t, args...)
		if code != 1 {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
		if _, err := os.Stat(h.config()); err != nil {
			t.Fatalf("%v removed the config Cursor's entry still runs (%v):\n%s", args, err, out)
		}
		if want := h.config() + ": the entry \"mcp-mux\" in " + h.files["cursor"]; args[2:] == nil && !strings.Contains(out, want) {
			t.Errorf("%v does not say why it kept the config (%q):\n%s", args, want, out)
		}
	}
	// What Cursor starts still starts, and serves.
	data, _ := os.ReadFile(h.files["cursor"])
	e := muxEntry(t, h.files["cursor"], data)
	cmd := exec.Command(e.Command, e.Args...)
	cmd.Env = h.env
	toolNames(t, &mcp.CommandTransport{Command: cmd})
	for _, what := range []string{"desktop", "claude", "vscode", "settings", "project settings"} {
		if got, _ := os.ReadFile(h.files[what]); !bytes.Equal(got, h.orig[what]) {
			t.Errorf("%s after --undo:\n%s", what, got)
		}
	}

	// The entry as --apply wrote it: --undo does the rest.
	os.WriteFile(h.files["cursor"], applied, 0o640)
	out, code := h.run(t, "import", "--undo")
	if code != 0 {
		t.Fatalf("last --undo: exit %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(h.files["cursor"]); !bytes.Equal(got, h.orig["cursor"]) {
		t.Errorf("Cursor's file after the last --undo:\n%s", got)
	}
	if _, err := os.Stat(h.config()); !os.IsNotExist(err) {
		t.Errorf("the config is still there (%v):\n%s", err, out)
	}
	if b := backupsUnder(t, h.home); len(b) != 0 {
		t.Errorf("saved copies left: %q", b)
	}
	if out, code := h.run(t, "import", "--undo"); code != 1 || !strings.Contains(out, "nothing to undo") {
		t.Errorf("--undo once more: exit %d\n%s", code, out)
	}
}

// TestImportUndoTakesBackEveryApplyNewestFirst: --apply, a server added
// to Cursor, --apply again, then one --undo: every file is as it was
// before the first --apply (Cursor's with the added server), and no saved
// copy (one holds a token) is left behind.
func TestImportUndoTakesBackEveryApplyNewestFirst(t *testing.T) {
	h := newApplyHome(t)
	if out, code := h.run(t, "import", "--apply"); code != 0 {
		t.Fatalf("first --apply: exit %d\n%s", code, out)
	}
	fixture, _ := json.Marshal(testkit.FixtureBin(t))
	added := `"new": {"command": ` + string(fixture) + `, "args": ["-name", "new"]},`
	h.edit(t, "cursor", `    /* "old"`, "    "+added+"\n    /* \"old\"")
	if out, code := h.run(t, "import", "--apply"); code != 0 || !strings.Contains(out, `"new"`) {
		t.Fatalf("second --apply: exit %d\n%s", code, out)
	}
	if got := serverNames(t, h.files["cursor"]); !slices.Equal(got, []string{"mcp-mux"}) {
		t.Fatalf("Cursor's servers after the second --apply: %q", got)
	}

	out, code := h.run(t, "import", "--undo")
	if code != 0 {
		t.Fatalf("--undo: exit %d\n%s", code, out)
	}
	if got := serverNames(t, h.files["cursor"]); !slices.Equal(got, []string{"browser", "search", "new"}) {
		data, _ := os.ReadFile(h.files["cursor"])
		t.Errorf("Cursor's servers after --undo: %q\n%s\n%s", got, data, out)
	}
	for what := range h.files {
		if got, _ := os.ReadFile(h.files[what]); what != "cursor" && !bytes.Equal(got, h.orig[what]) {
			t.Errorf("%s after --undo:\n%s\n%s", what, got, out)
		}
	}
	if _, err := os.Stat(h.config()); !os.IsNotExist(err) {
		t.Errorf("the config is still there (%v):\n%s", err, out)
	}
	if b := backupsUnder(t, h.home); len(b) != 0 {
		t.Errorf("saved copies left after a clean --undo: %q\n%s", b, out)
	}
}

// TestImportUndoRemovesTheConfigNoEntryRuns: a file from which the user
// removed mcp-mux's entry since --apply is left alone, said so, but then
// nothing runs mcp-mux with the config any more, and --undo removes it.
func TestImportUndoRemovesTheConfigNoEntryRuns(t *testing.T) {
	h := newApplyHome(t)
	if out, code := h.run(t, "import", "--apply"); code != 0 {
		t.Fatalf("--apply: exit %d\n%s", code, out)
	}
	mine := `{"mcpServers": {"mine": {"command": "mine"}}}`
	os.WriteFile(h.files["cursor"], []byte(mine), 0o640)
	out, code := h.run(t, "import", "--undo")
	if code != 1 || !strings.Contains(out, "left alone "+h.files["cursor"]+`: mcp-mux's entry "mcp-mux" in its mcpServers is gone since --apply`) {
		t.Errorf("--undo: exit %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(h.files["cursor"]); string(got) != mine {
		t.Errorf("Cursor's file: %s", got)
	}
	if _, err := os.Stat(h.config()); !os.IsNotExist(err) {
		t.Errorf("the config no entry runs is still there (%v):\n%s", err, out)
	}
}
