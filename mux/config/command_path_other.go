//go:build !windows

package config

import (
	"io/fs"
	"os"
)

// statCommand returns the file a command path runs.
func statCommand(path string) (fs.FileInfo, error) { return os.Stat(path) }

// notExecutable says how to make fi a program, or "" if it is one.
func notExecutable(fi fs.FileInfo) string {
	if fi.Mode().Perm()&0o111 == 0 {
		return "chmod +x it"
	}
	return ""
}

// batchArgProblem finds nothing: only Windows runs batch files through
// cmd.exe.
func batchArgProblem(func(string) (string, error), string, []string) (int, string) { return 0, "" }
