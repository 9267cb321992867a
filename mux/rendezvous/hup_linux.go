package rendezvous

import "golang.org/x/sys/unix"

// hupEvents are the events Hungup polls for: POLLRDHUP tells a peer that
// closed its writing side from one that closed both (POLLHUP).
const hupEvents = unix.POLLIN | unix.POLLRDHUP
