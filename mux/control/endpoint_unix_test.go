//go:build !windows

package control

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// answering listens at path with mode, answering any request with a
// document that names marker, as a process of another user's might.
func answering(t *testing.T, path string, mode os.FileMode, marker string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(Document{Version: Version, PID: os.Getpid(), Config: marker})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write(append(data, '\n'))
			c.Close()
		}
	}()
}

// TestFindRefusesASocketNotTheUsersAlone: a socket that others may open
// (mode 0666), or, run as root, one owned by another user, is neither
// listed nor connected to, though it would answer; the warning says why.
func TestFindRefusesASocketNotTheUsersAlone(t *testing.T) {
	dir := shortDir(t)
	// Live pids, so that only the check refuses them: this process's
	// parent and this one.
	open := filepath.Join(dir, strconv.Itoa(os.Getppid())+".sock")
	answering(t, open, 0o666, "open-to-all")
	var foreign string
	if os.Geteuid() == 0 {
		foreign = filepath.Join(dir, strconv.Itoa(os.Getpid())+".sock")
		answering(t, foreign, 0o600, "another-user")
		if err := os.Chown(foreign, 12345, 12345); err != nil {
			t.Fatal(err)
		}
	}
	eps, warnings := findAll(t)
	if len(eps) != 0 {
		t.Fatalf("found %+v: a socket not the user's alone was listed", eps)
	}
	joined := strings.Join(warnings, "\n")
	if !strings.Contains(joined, open+": mode 0666, not 0600") {
		t.Errorf("warnings %q do not say why %s was skipped", warnings, open)
	}
	if foreign != "" && !strings.Contains(joined, foreign+": owned by uid 12345, not by you") {
		t.Errorf("warnings %q do not say why %s was skipped", warnings, foreign)
	}
	// Nor does Query connect to one, named directly.
	if _, err := Query(Endpoint{PID: os.Getppid(), Addr: open}); err == nil || !strings.Contains(err.Error(), "mode 0666") {
		t.Errorf("query of the 0666 socket: %v", err)
	}
	// Neither was removed: they are not the user's to clean.
	for _, p := range []string{open, foreign} {
		if _, err := os.Lstat(p); p != "" && err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

// TestFindRemovesTheSocketsOfGoneProcesses: a socket left by a process
// killed with SIGKILL (its pid gone), and one whose pid is alive but
// whose listener is not (the pid reused), are removed, not listed.
func TestFindRemovesTheSocketsOfGoneProcesses(t *testing.T) {
	dir := shortDir(t)
	cmd := exec.Command("sh", "-c", "exit 0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, strconv.Itoa(cmd.Process.Pid)+".sock")
	reused := filepath.Join(dir, strconv.Itoa(os.Getppid())+".sock")
	for _, p := range []string{gone, reused} {
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		os.Chmod(p, 0o600)
	}
	eps, warnings := findAll(t)
	if _, err := os.Lstat(gone); err == nil {
		t.Errorf("%s, of a gone pid, was not removed", gone)
	}
	if len(eps) != 1 || eps[0].Addr != reused || len(warnings) != 0 {
		t.Fatalf("found %+v (warnings %q): want only %s, whose pid is alive", eps, warnings, reused)
	}
	if _, err := Query(eps[0]); err != ErrGone {
		t.Fatalf("query of a socket no one listens on: %v, want ErrGone", err)
	}
	if _, err := os.Lstat(reused); err == nil {
		t.Errorf("%s, which no one listens on, was not removed", reused)
	}
}

// TestListenMakesItsDirectoryPrivate: the directory is made 0700 (a
// loose one of the user's is tightened), the socket 0600; one of another
// user's, made first in a shared temporary directory, is not used.
func TestListenMakesItsDirectoryPrivate(t *testing.T) {
	base := shortDir(t)
	dir := filepath.Join(base, "c")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(DirEnv, dir)
	srv, err := Listen(func() Document { return Document{Version: Version} })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %04o, want 0700", fi.Mode().Perm())
	}
	if fi, _ := os.Lstat(srv.Addr()); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %04o, want 0600", fi.Mode().Perm())
	}
	if os.Geteuid() != 0 {
		return // only root can make a directory of another user's
	}
	theirs := filepath.Join(base, "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(theirs, 12345, 12345)
	t.Setenv(DirEnv, theirs)
	if srv, err := Listen(func() Document { return Document{} }); err == nil {
		srv.Close()
		t.Fatalf("listened at %s, in another user's directory", srv.Addr())
	}
}
