//go:build !windows

package control

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// maxSocketPath is what every unix takes for a socket's path (macOS: 104
// bytes with the terminating NUL, Linux: 108).
const maxSocketPath = 103

// dirs are the directories the endpoints may be in, in order of
// preference: $XDG_RUNTIME_DIR/mcp-mux (the user's own, gone at logout),
// else the temporary directory's mcp-mux-UID, and /tmp/mcp-mux-UID for a
// temporary directory whose path is too long for a socket.
func dirs() []string {
	if d := os.Getenv(DirEnv); d != "" {
		return []string{d}
	}
	uid := strconv.Itoa(os.Geteuid())
	var out []string
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		out = append(out, filepath.Join(d, "mcp-mux"))
	} else {
		out = append(out, filepath.Join(os.TempDir(), "mcp-mux-"+uid))
	}
	if short := filepath.Join("/tmp", "mcp-mux-"+uid); !slices.Contains(out, short) {
		out = append(out, short)
	}
	return out
}

func socketName(pid int) string { return strconv.Itoa(pid) + ".sock" }

// listen makes this process's socket, mode 0600, in the first directory
// its path fits, which is made 0700 (and must be the user's own).
func listen() (net.Listener, string, func(), error) {
	pid := os.Getpid()
	var errs []error
	for _, dir := range dirs() {
		path := filepath.Join(dir, socketName(pid))
		if len(path) > maxSocketPath {
			errs = append(errs, fmt.Errorf("%s is too long for a unix socket", path))
			continue
		}
		if err := ownDir(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		// A socket of this pid is a dead process's, whose pid this one
		// got; the others of dead processes are cleaned on the way.
		os.Remove(path)
		clean(dir)
		ln, err := net.Listen("unix", path)
		if err != nil {
			errs = append(errs, fmt.Errorf("control socket: %w", err))
			continue
		}
		// The directory is 0700 already: the mode is for the check that
		// `status` makes of each socket.
		if err := os.Chmod(path, 0o600); err != nil {
			ln.Close()
			errs = append(errs, fmt.Errorf("control socket: %w", err))
			continue
		}
		return ln, path, func() { os.Remove(path) }, nil
	}
	return nil, "", nil, errors.Join(errs...)
}

// ownDir makes dir if needed and checks that it is a directory of this
// user's that no one else can enter: another user's (made first in a
// shared temporary directory) is refused.
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("control directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("control directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("control directory %s is not a directory of yours: not used", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("control directory: %w", err)
		}
	}
	return nil
}

// clean removes from dir the sockets of this user's processes that are
// gone (a kill -9 leaves its socket behind).
func clean(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		pid, ok := socketPID(e.Name())
		if !ok || pid == os.Getpid() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if fi, err := os.Lstat(path); err == nil && ours(fi) == "" && !alive(pid) {
			os.Remove(path)
		}
	}
}

func socketPID(name string) (int, bool) {
	s, ok := strings.CutSuffix(name, ".sock")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(s)
	return pid, err == nil && pid > 0
}

// ours says why the file fi is not a socket of this user's alone, or "".
func ours(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode().Type() != fs.ModeSocket || !ok:
		return "not a socket"
	case int(st.Uid) != os.Geteuid():
		return fmt.Sprintf("owned by uid %d, not by you (uid %d)", st.Uid, os.Geteuid())
	case fi.Mode().Perm() != 0o600:
		return fmt.Sprintf("mode %04o, not 0600", fi.Mode().Perm())
	}
	return ""
}

// alive reports whether pid is a process (of anyone's).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func find(warn func(string)) ([]Endpoint, error) {
	var out []Endpoint
	seen := map[int]bool{}
	for _, dir := range dirs() {
		fi, err := os.Lstat(dir)
		if err != nil {
			continue // no mcp-mux made it
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
			warn(fmt.Sprintf("skipping %s: not a directory of yours", dir))
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("listing the control directory: %w", err)
		}
		for _, e := range entries {
			pid, ok := socketPID(e.Name())
			if !ok || seen[pid] {
				continue
			}
			path := filepath.Join(dir, e.Name())
			fi, err := os.Lstat(path)
			if err != nil {
				continue
			}
			if why := ours(fi); why != "" {
				warn(fmt.Sprintf("skipping %s: %s", path, why))
				continue
			}
			if !alive(pid) {
				os.Remove(path) // its process was killed: nothing removed it
				continue
			}
			seen[pid] = true
			out = append(out, Endpoint{PID: pid, Addr: path})
		}
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return a.PID - b.PID })
	return out, nil
}

// dial connects to ep, checking it again first: the file may have been
// replaced since Find. A socket no one listens on is a gone process's
// (its pid reused): it is removed.
func dial(ep Endpoint) (net.Conn, error) {
	fi, err := os.Lstat(ep.Addr)
	if err != nil {
		return nil, ErrGone
	}
	if why := ours(fi); why != "" {
		return nil, fmt.Errorf("%s: %s", ep.Addr, why)
	}
	c, err := net.DialTimeout("unix", ep.Addr, ioTimeout)
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		os.Remove(ep.Addr)
		return nil, ErrGone
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to mcp-mux %d: %w", ep.PID, err)
	}
	return c, nil
}
