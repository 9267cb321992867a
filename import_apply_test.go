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
