//go:build !linux

package backends

import "time"

// supervisorConn is Linux's (see supervisor_linux.go): elsewhere no
// backend runs under a supervisor.
type supervisorConn struct{}

func (*supervisorConn) cut(uint32)                       {}
func (*supervisorConn) leave(uint32, time.Duration) bool { return false }
