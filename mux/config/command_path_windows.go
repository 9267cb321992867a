package config

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"

	"github.com/mcp-mux/mcp-mux/backends"
)

// statCommand returns the file a command path runs: exec on Windows tries
// the extensions of PATHEXT when the path has none of them (bin\server
// runs bin\server.exe).
func statCommand(path string) (fs.FileInfo, error) {
	if lp, err := exec.LookPath(path); err == nil {
		path = lp
	}
	return os.Stat(path)
}

// notExecutable says how to make fi a program, or "" if it is one.
func notExecutable(fi fs.FileInfo) string {
	if windowsRunnable(fi.Name(), os.Getenv("PATHEXT")) {
		return ""
	}
	return "Windows runs only files whose extension is in PATHEXT, such as .exe"
}

// batchArgProblem reports an argument that cannot be passed to command
// when it is a batch file (npx.cmd), which runs through cmd.exe: its
// index in args and why (see backends.BatchCommandLine). lookPath finds
// a bare command as the backend will be started.
func batchArgProblem(lookPath func(string) (string, error), command string, args []string) (int, string) {
	path, err := lookPath(command)
	if err != nil || !backends.IsBatchFile(path) {
		return 0, ""
	}
	var be *backends.BatchArgError
	if err := backends.CheckBatchArgs(path, args); errors.As(err, &be) && be.Index >= 0 {
		return be.Index, err.Error()
	}
	return 0, ""
}
