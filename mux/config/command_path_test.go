package config

import (
	"path/filepath"
	"testing"
)

// TestWindowsRunsOnlyPathextFiles: what Windows (and exec there) runs is
// decided by the file's extension, from PATHEXT, case-insensitively.
func TestWindowsRunsOnlyPathextFiles(t *testing.T) {
	for _, tt := range []struct {
		name, pathext string
		want          bool
	}{
		{"server.exe", "", true}, // Go's list when PATHEXT is empty: .com .exe .bat .cmd
		{"SERVER.EXE", ".COM;.EXE;.BAT;.CMD", true},
		{"npx.cmd", ".COM;.EXE;.BAT;.CMD", true},
		{"server", ".COM;.EXE;.BAT;.CMD", false},
		{"notes.txt", "", false},
		{"tool.py", ".COM;.EXE;.PY", true},
		{"tool.py", ".COM;.EXE", false},
		{"archive.tar.exe", ";;.EXE;", true},
		{"weird.", ".EXE", false},
	} {
		if got := windowsRunnable(tt.name, tt.pathext); got != tt.want {
			t.Errorf("windowsRunnable(%q, %q) = %v, want %v", tt.name, tt.pathext, got, tt.want)
		}
	}
}

// TestRelativePathsGoUnderTheDirectory: a relative path is joined to the
// directory; an absolute one is kept (the rooted and drive forms of
// Windows: TestConfigWindowsPaths).
func TestRelativePathsGoUnderTheDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ path, want string }{
		{"logs/mux.log", filepath.Join(dir, "logs", "mux.log")},
		{"./bin/../bin/server", filepath.Join(dir, "bin", "server")},
		{"..", filepath.Dir(dir)},
	} {
		if got := underDir(dir, tt.path); got != tt.want {
			t.Errorf("underDir(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}
