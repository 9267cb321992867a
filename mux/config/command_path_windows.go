package config

import (
	"io/fs"
	"os"
	"os/exec"
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
