//go:build unix

package rendezvous

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// maxSocketPath is the longest unix socket path every unix takes.
const maxSocketPath = 103

// Dir is the user's rendezvous directory: /run/user/UID/mcp-mux where
// the system gives the user one, else /tmp/mcp-mux-UID. It does not
// depend on the environment: agents launch mcp-mux with different ones
// (Codex clears XDG_RUNTIME_DIR and TMPDIR), and every launch must meet
// at the same place. It is made 0700 and must be the user's own.
func Dir() (string, error) {
	if d := os.Getenv(DirEnv); d != "" {
		return d, ownDir(d)
	}
	uid := strconv.Itoa(os.Geteuid())
	run := filepath.Join("/run/user", uid)
	if fi, err := os.Stat(run); err == nil && fi.IsDir() && owned(fi) {
		d := filepath.Join(run, "mcp-mux")
		if ownDir(d) == nil {
			return d, nil
		}
	}
	d := filepath.Join("/tmp", "mcp-mux-"+uid)
	return d, ownDir(d)
}

// ownDir makes dir if needed and checks that it is a directory of this
// user's that no one else can enter: another user's, made first in a
// shared /tmp, is refused.
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("rendezvous directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("rendezvous directory: %w", err)
	}
	if !fi.IsDir() || !owned(fi) {
		return fmt.Errorf("rendezvous directory %s is not a directory of yours", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("rendezvous directory: %w", err)
		}
	}
	return nil
}

func owned(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// SocketPath is where the long-lived process listens.
func (p Place) SocketPath() string { return p.path(".sock") }

// Check says why p cannot be used, or nil.
func (p Place) Check() error {
	if len(p.SocketPath()) > maxSocketPath {
		return fmt.Errorf("%s is too long for a unix socket", p.SocketPath())
	}
	return ownDir(p.Dir)
}

func executable() (string, error) {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(exe)
}

func fileIdentity(fi fs.FileInfo) string {
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st == nil {
		return fmt.Sprintf("%d-%d", fi.Size(), fi.ModTime().UnixNano())
	}
	return fmt.Sprintf("%d-%d-%d-%d", st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
}

// lock is a held flock.
type lock struct{ f *os.File }

// tryLock takes the lock file at path, exclusively, or says it is held.
func tryLock(path string) (*lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errHeld
		}
		return nil, err
	}
	return &lock{f}, nil
}

func (l *lock) release() {
	if l != nil {
		l.f.Close() // closing drops the flock
	}
}

// listen binds the socket of p, which only the holder of its run lock
// may do: whatever file is at its path is stale.
func (p Place) listen() (net.Listener, error) {
	path := p.SocketPath()
	os.Remove(path)
	old := syscall.Umask(0o077)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // Close unlinks it, in order (see Listener.Close)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

func (p Place) unlink() { os.Remove(p.SocketPath()) }

// dial connects to p's socket, if it is the user's own.
func (p Place) dial() (net.Conn, error) {
	fi, err := os.Lstat(p.SocketPath())
	if err != nil {
		return nil, err
	}
	if why := socketOurs(fi); why != "" {
		return nil, fmt.Errorf("%s: %s: %w", p.SocketPath(), why, errNotOurs)
	}
	c, err := net.DialTimeout("unix", p.SocketPath(), HelloTimeout)
	if err != nil {
		return nil, err
	}
	if why := peerOurs(c); why != "" {
		c.Close()
		return nil, fmt.Errorf("%s: %s: %w", p.SocketPath(), why, errNotOurs)
	}
	return c, nil
}

func socketOurs(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode().Type() != fs.ModeSocket || !ok:
		return "not a socket"
	case int(st.Uid) != os.Geteuid():
		return fmt.Sprintf("owned by uid %d, not by you", st.Uid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Sprintf("mode %04o, open to others", fi.Mode().Perm())
	}
	return ""
}
