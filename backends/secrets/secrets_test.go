package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The file store keeps each value in a file only the user can read, in a
// directory only the user can enter, and replaces a value whole.
func TestFileStoreIsPrivate(t *testing.T) {
	t.Setenv("MCP_MUX_STATE_DIR", filepath.Join(t.TempDir(), "state"))
	f := &FileStore{}
	if _, err := f.Get("secret:A"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of nothing: %v", err)
	}
	if dir, _ := StateDir(); dirExists(dir) {
		t.Error("reading made the state directory")
	}
	for _, v := range []string{"first value", "second"} {
		if err := f.Set("secret:A", v); err != nil {
			t.Fatal(err)
		}
		if got, err := f.Get("secret:A"); err != nil || got != v {
			t.Fatalf("Get = %q, %v; want %q", got, err, v)
		}
	}
	p := f.Where("secret:A")
	dir, _ := StateDir()
	if filepath.Dir(p) != filepath.Join(dir, "secrets") || filepath.Base(p) != "secret%3aA" {
		t.Errorf("stored at %s", p)
	}
	if runtime.GOOS != "windows" {
		for path, want := range map[string]os.FileMode{p: 0o600, filepath.Dir(p): 0o700, dir: 0o700} {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: mode %v, want %v (%v)", path, fi.Mode().Perm(), want, err)
			}
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	if err := f.Delete("secret:A"); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete("secret:A"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{"GITHUB_TOKEN": true, "a.b-c": true, "": false, "a b": false, "a/b": false, "a:b": false} {
		if ValidName(name) != want {
			t.Errorf("ValidName(%q) = %v", name, !want)
		}
	}
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// Storing or deleting a secret of ${secret:NAME} changes the stamp that a
// serving mcp-mux watches (a small file: the OS store is not asked once a
// second); reading one does not.
func TestSetAndDeleteChangeTheStamp(t *testing.T) {
	t.Setenv("MCP_MUX_STATE_DIR", filepath.Join(t.TempDir(), "state"))
	t.Setenv("MCP_MUX_SECRET_STORE", "file")
	before := Stamp()
	if _, err := Set("A", "v"); err != nil {
		t.Fatal(err)
	}
	set := Stamp()
	if set == before {
		t.Fatalf("the stamp is %q after Set, as before", set)
	}
	if _, err := Get("A"); err != nil {
		t.Fatal(err)
	}
	if Stamp() != set {
		t.Error("Get changed the stamp")
	}
	if err := Delete("A"); err != nil {
		t.Fatal(err)
	}
	if Stamp() == set {
		t.Error("the stamp did not change with Delete")
	}
}
