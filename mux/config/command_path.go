package config

import (
	"os"
	"path/filepath"
	"strings"
)

// The OS-specific part of paths in the config: how a relative path is
// joined to its directory (Windows has paths that are neither absolute nor
// relative to a directory), and which files a command path may name
// (command_path_windows.go, command_path_other.go).

// underDir returns path, which is not absolute, made absolute against dir
// (absolute). On Unix that is a join. On Windows a path may also be rooted
// without a drive (\logs\mux.log: on dir's drive) or name a drive without
// a root (D:logs: relative to that drive's current directory, which for
// dir's own drive is taken to be dir).
func underDir(dir, path string) string {
	if vol := filepath.VolumeName(path); vol != "" {
		if strings.EqualFold(vol, filepath.VolumeName(dir)) {
			return filepath.Join(dir, path[len(vol):])
		}
		if abs, err := filepath.Abs(path); err == nil {
			return abs
		}
		return path
	}
	if path != "" && os.IsPathSeparator(path[0]) {
		return filepath.Clean(filepath.VolumeName(dir) + path)
	}
	return filepath.Join(dir, path)
}

// windowsRunnable reports whether Windows runs the file called name as a
// program, as exec there does: its extension is one of pathext's (the
// PATHEXT variable; Go's .com, .exe, .bat and .cmd when it is empty),
// whatever the case.
func windowsRunnable(name, pathext string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	if ext == "" || ext == "." {
		return false
	}
	exts := []string{".com", ".exe", ".bat", ".cmd"}
	if pathext != "" {
		exts = nil
		for _, e := range strings.Split(strings.ToLower(pathext), ";") {
			if e != "" && e[0] == '.' {
				exts = append(exts, e)
			}
		}
	}
	for _, e := range exts {
		if ext == e {
			return true
		}
	}
	return false
}
