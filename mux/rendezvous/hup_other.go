//go:build unix && !linux

package rendezvous

import "golang.org/x/sys/unix"

// hupEvents are the events Hungup polls for.
const hupEvents = unix.POLLIN
