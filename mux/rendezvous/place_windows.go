//go:build windows

package rendezvous

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"

	"github.com/mcp-mux/mcp-mux/mux/winpipe"
)

// On Windows a place is a named pipe, \\.\pipe\mcp-mux-SID-KEY, whose
// security descriptor makes the user its owner and grants only the user
// access; its locks are files in the user's local application data.

// Dir is the user's rendezvous directory, for the locks and the build
// memo: %LOCALAPPDATA%\mcp-mux\run, as the system knows the folder (not
// the variable: agents launch mcp-mux with environments of their own,
// some with a few variables only, and every launch must meet at one
// place).
func Dir() (string, error) {
	if d := os.Getenv(DirEnv); d != "" {
		return d, os.MkdirAll(d, 0o700)
	}
	base, err := windows.KnownFolderPath(windows.FOLDERID_LocalAppData, 0)
	if err != nil {
		return "", fmt.Errorf("rendezvous directory: %w", err)
	}
	d := filepath.Join(base, "mcp-mux", "run")
	return d, os.MkdirAll(d, 0o700)
}

func userSID() (string, error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return "", fmt.Errorf("finding the current user: %w", err)
	}
	return tu.User.Sid.String(), nil
}

// SocketPath is the pipe the long-lived process listens on.
func (p Place) SocketPath() string {
	sid, _ := userSID()
	name := `\\.\pipe\mcp-mux-` + sid + "-" + p.Key
	if d := os.Getenv(DirEnv); d != "" {
		h := fnv.New32a()
		h.Write([]byte(d))
		name += "-" + strconv.FormatUint(uint64(h.Sum32()), 16)
	}
	return name
}

// Check says why p cannot be used, or nil.
func (p Place) Check() error { return os.MkdirAll(p.Dir, 0o700) }

func executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(exe)
}

func fileIdentity(fi fs.FileInfo) string {
	return fmt.Sprintf("%d-%d", fi.Size(), fi.ModTime().UnixNano())
}

type lock struct{ f *os.File }

func tryLock(path string) (*lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	ol := new(windows.Overlapped)
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if err != nil {
		f.Close()
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
			return nil, errHeld
		}
		return nil, err
	}
	return &lock{f}, nil
}

func (l *lock) release() {
	if l != nil {
		l.f.Close()
	}
}

func (p Place) listen() (net.Listener, error) {
	sid, err := userSID()
	if err != nil {
		return nil, err
	}
	// Message mode: a session closes its writing side when its agent's
	// stdin ends (CloseWrite), and still reads the answers.
	return winpipe.Listen(p.SocketPath(), "O:"+sid+"D:P(A;;GA;;;"+sid+")")
}

func (p Place) unlink() {} // a pipe is gone with its listener

func (p Place) dial() (net.Conn, error) {
	timeout := HelloTimeout
	c, err := winio.DialPipe(p.SocketPath(), &timeout)
	if err != nil {
		return nil, err
	}
	if why := peerOurs(c); why != "" {
		c.Close()
		return nil, fmt.Errorf("%s: %s: %w", p.SocketPath(), why, errNotOurs)
	}
	return c, nil
}

// peerOurs says why the pipe c is not owned by this user, or "".
func peerOurs(c net.Conn) string {
	f, ok := c.(interface{ Fd() uintptr })
	if !ok {
		return "its handle cannot be checked"
	}
	sd, err := windows.GetSecurityInfo(windows.Handle(f.Fd()), windows.SE_KERNEL_OBJECT, windows.OWNER_SECURITY_INFORMATION)
	if err != nil {
		return "its owner cannot be read"
	}
	owner, _, err := sd.Owner()
	sid, serr := userSID()
	if err != nil || serr != nil || owner == nil || owner.String() != sid {
		return "not owned by you"
	}
	return ""
}
