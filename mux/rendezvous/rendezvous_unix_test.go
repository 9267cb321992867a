//go:build unix

package rendezvous

import (
	"net"
	"os"
	"testing"
)

func TestAStaleSocketIsReplacedAndAnotherBuildMeetsElsewhere(t *testing.T) {
	dir := shortDir(t)
	p := place(t, dir, "b1")
	// A process killed with -9 leaves its socket and frees its lock.
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", p.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	os.Chmod(p.SocketPath(), 0o600)
	spawned := 0
	var ln *Listener
	c, err := Meet(p, func() (<-chan struct{}, error) {
		spawned++
		ln, err = Listen(p)
		if err == nil {
			go serveHellos(ln, 1)
		}
		return nil, err
	})
	if err != nil {
		t.Fatalf("meeting past a stale socket: %v", err)
	}
	c.Close()
	defer ln.Close()
	if spawned != 1 {
		t.Fatalf("spawned %d, want 1", spawned)
	}
	other := place(t, dir, "b2")
	if other.SocketPath() == p.SocketPath() {
		t.Fatal("two builds meet at one place")
	}
}

func TestAnotherUsersSocketOrDirectoryIsNeverUsed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a file of another user's takes root")
	}
	dir := shortDir(t)
	p := place(t, dir, "b1")
	ln, err := Listen(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go serveHellos(ln, 1)
	if err := os.Chown(p.SocketPath(), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if c, err := Meet(p, func() (<-chan struct{}, error) { t.Error("spawned past another user's socket"); return nil, nil }); err == nil {
		c.Close()
		t.Fatal("met at a socket of another user's")
	}
	// A directory another user made first (in a shared /tmp) is refused.
	theirs := shortDir(t)
	os.MkdirAll(theirs, 0o700)
	os.Chown(theirs, 65534, 65534)
	q := place(t, theirs, "b1")
	if _, err := Meet(q, func() (<-chan struct{}, error) { return nil, nil }); err == nil {
		t.Fatal("met in a directory of another user's")
	}
	if _, err := Listen(q); err == nil {
		t.Fatal("listened in a directory of another user's")
	}
}
