package rendezvous

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// peerOurs says why the process at the other end of c is not this user's,
// or "".
func peerOurs(c net.Conn) string {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return "not a unix socket"
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return "its peer cannot be checked"
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil || cred == nil {
		return "its peer cannot be checked"
	}
	if int(cred.Uid) != os.Geteuid() {
		return fmt.Sprintf("its peer is uid %d, not you", cred.Uid)
	}
	return ""
}
