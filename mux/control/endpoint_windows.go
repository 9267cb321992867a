//go:build windows

package control

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"

	"github.com/mcp-mux/mcp-mux/mux/winpipe"
)

// On Windows the endpoint is a named pipe, \\.\pipe\mcp-mux-SID-PID: its
// security descriptor makes the user its owner and grants only the user
// access, and the pipe is gone with its process (nothing stale is left).

const pipeDir = `\\.\pipe\`

// userSID is the string SID of the user this process runs as.
func userSID() (string, error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return "", fmt.Errorf("finding the current user: %w", err)
	}
	return tu.User.Sid.String(), nil
}

// pipePrefix is the name of this user's pipes before the pid; DirEnv, if
// set, adds its own part (tests).
func pipePrefix(sid string) string {
	p := "mcp-mux-" + sid + "-"
	if d := os.Getenv(DirEnv); d != "" {
		h := fnv.New32a()
		h.Write([]byte(d))
		p += strconv.FormatUint(uint64(h.Sum32()), 16) + "-"
	}
	return p
}

func listen() (net.Listener, string, func(), error) {
	sid, err := userSID()
	if err != nil {
		return nil, "", nil, err
	}
	path := pipeDir + pipePrefix(sid) + strconv.Itoa(os.Getpid())
	ln, err := winpipe.Listen(path, "O:"+sid+"D:P(A;;GA;;;"+sid+")")
	if err != nil {
		return nil, "", nil, fmt.Errorf("control pipe: %w", err)
	}
	return ln, path, func() {}, nil
}

func find(warn func(string)) ([]Endpoint, error) {
	sid, err := userSID()
	if err != nil {
		return nil, err
	}
	prefix := pipePrefix(sid)
	pattern, _ := windows.UTF16PtrFromString(pipeDir + "*")
	var fd windows.Win32finddata
	h, err := windows.FindFirstFile(pattern, &fd)
	if err != nil {
		if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_NO_MORE_FILES) {
			return nil, nil
		}
		if errors.Is(err, windows.ERROR_BAD_DEV_TYPE) {
			return byProcess(prefix, warn)
		}
		return nil, fmt.Errorf("listing named pipes: %w", err)
	}
	defer windows.FindClose(h)
	var out []Endpoint
	for {
		name := windows.UTF16ToString(fd.FileName[:])
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			if pid, err := strconv.Atoi(rest); err == nil && pid > 0 {
				out = append(out, Endpoint{PID: pid, Addr: pipeDir + name})
			}
		}
		if err := windows.FindNextFile(h, &fd); err != nil {
			break
		}
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return a.PID - b.PID })
	return out, nil
}

// byProcess finds the endpoints where \\.\pipe\ cannot be listed (Wine
// answers Bad device type): the pipe of each running process's pid that
// can be connected to.
func byProcess(prefix string, warn func(string)) ([]Endpoint, error) {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	defer windows.CloseHandle(snap)
	var out []Endpoint
	pe := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &pe); err == nil; err = windows.Process32Next(snap, &pe) {
		ep := Endpoint{PID: int(pe.ProcessID), Addr: pipeDir + prefix + strconv.Itoa(int(pe.ProcessID))}
		c, err := dial(ep)
		switch {
		case errors.Is(err, ErrGone):
		case err != nil:
			warn(err.Error())
		default:
			c.Close()
			out = append(out, ep)
		}
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return a.PID - b.PID })
	return out, nil
}

// dial connects to ep and checks that the pipe is the user's own, owned
// by the user and served by the process its name says: a pipe of that
// name that another user made first is refused.
func dial(ep Endpoint) (net.Conn, error) {
	timeout := ioTimeout
	c, err := winio.DialPipe(ep.Addr, &timeout)
	if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return nil, ErrGone
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to mcp-mux %d: %w", ep.PID, err)
	}
	if why := pipeOwned(c, ep.PID); why != "" {
		c.Close()
		return nil, fmt.Errorf("%s: %s", ep.Addr, why)
	}
	return c, nil
}

// pipeOwned says why the pipe c is not this user's, served by pid, or "".
func pipeOwned(c net.Conn, pid int) string {
	f, ok := c.(interface{ Fd() uintptr })
	if !ok {
		return "its handle cannot be checked"
	}
	h := windows.Handle(f.Fd())
	var server uint32
	if err := windows.GetNamedPipeServerProcessId(h, &server); err != nil || int(server) != pid {
		return "served by another process than its name says"
	}
	sd, err := windows.GetSecurityInfo(h, windows.SE_KERNEL_OBJECT, windows.OWNER_SECURITY_INFORMATION)
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
