package winpipe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

func testPipe(t *testing.T) (string, string) {
	t.Helper()
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		t.Fatal(err)
	}
	sid := tu.User.Sid.String()
	return fmt.Sprintf(`\\.\pipe\mcp-mux-winpipe-test-%d-%d`, os.Getpid(), time.Now().UnixNano()), "O:" + sid + "D:P(A;;GA;;;" + sid + ")"
}

func dial(t *testing.T, name string) net.Conn {
	t.Helper()
	timeout := 5 * time.Second
	c, err := winio.DialPipe(name, &timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// TestEveryClientIsAnsweredAndItsCloseWriteIsTheEnd: the first client
// too (Wine let it connect to an instance winio never accepted on), and
// several at once; a client's CloseWrite ends what the server reads, and
// the client still reads the answer.
func TestEveryClientIsAnsweredAndItsCloseWriteIsTheEnd(t *testing.T) {
	name, sddl := testPipe(t)
	ln, err := Listen(name, sddl)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				b, err := io.ReadAll(c)
				fmt.Fprintf(c, "read %q, %v\n", b, err)
			}()
		}
	}()
	for i := range 5 {
		c := dial(t, name)
		fmt.Fprintf(c, "client %d", i)
		if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		got, err := bufio.NewReader(c).ReadString('\n')
		if want := fmt.Sprintf("read \"client %d\", <nil>\n", i); got != want || err != nil {
			t.Fatalf("client %d: the server said %q (%v), want %q", i, got, err, want)
		}
	}
}

// TestASecondListenerOfAPipeIsRefused: a pipe someone made first (another
// user's, squatting the name) is never joined.
func TestASecondListenerOfAPipeIsRefused(t *testing.T) {
	testkit.SkipUnderWine(t, "FILE_FLAG_FIRST_PIPE_INSTANCE is not enforced: a second CreateNamedPipe of one name succeeds")
	name, sddl := testPipe(t)
	ln, err := Listen(name, sddl)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ln2, err := Listen(name, sddl); err == nil {
		ln2.Close()
		t.Fatal("a second listener of a pipe that exists")
	}
}

// TestClosingTheListenerEndsAcceptAndThePipe: an Accept waiting ends
// with net.ErrClosed, and the name is free for the next listener.
func TestClosingTheListenerEndsAcceptAndThePipe(t *testing.T) {
	name, sddl := testPipe(t)
	ln, err := Listen(name, sddl)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waits 10 s after Close")
	}
	ln2, err := Listen(name, sddl)
	if err != nil {
		t.Fatalf("listening again after Close: %v", err)
	}
	ln2.Close()
}
