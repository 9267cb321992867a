package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyWriteLeavesAFileChangedSinceRead: a client's file that differs
// from the bytes --apply parsed (the client wrote it meanwhile) is left
// as it is, with no backup, and said so.
func TestApplyWriteLeavesAFileChangedSinceRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	now := []byte(`{"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}}}`)
	os.WriteFile(path, now, 0o600)
	w := plannedWrite{path: path, old: []byte(`{"mcpServers": {"a": {"command": "a"}}}`), new: []byte(`{"mcpServers": {}}`)}
	_, err := applyWrite(w, "20260101-000000")
	if err == nil || !strings.Contains(err.Error(), "changed since it was read") {
		t.Errorf("err = %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != string(now) {
		t.Errorf("written: %s", data)
	}
	if b, _ := filepath.Glob(path + ".mcp-mux-backup-*"); len(b) != 0 {
		t.Errorf("backups %q", b)
	}

	// As read, it is saved and written.
	w.old = now
	u, err := applyWrite(w, "20260101-000000")
	if err != nil || u.Backup != path+".mcp-mux-backup-20260101-000000" {
		t.Fatalf("%+v %v", u, err)
	}
	if data, _ := os.ReadFile(u.Backup); string(data) != string(now) {
		t.Errorf("backup: %s", data)
	}
	if data, _ := os.ReadFile(path); string(data) != string(w.new) {
		t.Errorf("written: %s", data)
	}
}

// TestReadManifestTakesAnOlderRecord: the record an older mcp-mux wrote
// (its one --apply, at the top) is read as the first --apply, so that
// --undo still takes it back, whole file by whole file.
func TestReadManifestTakesAnOlderRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "import-undo.json")
	os.WriteFile(path, []byte(`{"applied": "2026-01-01T00:00:00Z", "files": [{"path": "/c.toml", "written_sha256": "ab"}, {"path": "/m.json", "backup": "/m.json.b", "written_sha256": "cd"}]}`), 0o600)
	m, err := readManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Applies) != 1 || m.Applies[0].Applied != "2026-01-01T00:00:00Z" || len(m.Applies[0].Files) != 2 || m.Applies[0].Files[1].Backup != "/m.json.b" || m.Files != nil {
		t.Errorf("%+v", m)
	}
}
