package testkit

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// RemoteFixture is the fixture serving over HTTP in a process of its own
// (see testdata/fixture/http.go): mode "-http" is Streamable HTTP at /mcp,
// "-sse" is HTTP+SSE at /sse.
type RemoteFixture struct {
	t testing.TB
	// Mode is "-http" or "-sse".
	Mode string
	args []string
	// Addr is the host:port it listens on, kept across Restart.
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRemoteFixture runs the fixture in mode with args on a free port of
// 127.0.0.1; it is killed when the test ends.
func StartRemoteFixture(t testing.TB, mode string, args ...string) *RemoteFixture {
	t.Helper()
	f := &RemoteFixture{t: t, Mode: mode, args: args, Addr: "127.0.0.1:0"}
	f.start()
	t.Cleanup(f.Kill)
	return f
}

// start runs the fixture on f.Addr and waits for its "listening on" line.
func (f *RemoteFixture) start() {
	f.t.Helper()
	cmd := exec.Command(FixtureBin(f.t), append([]string{f.Mode, f.Addr}, f.args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.cmd, f.done = cmd, make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(f.done)
	}()
	select {
	case f.Addr = <-addr:
	case <-f.done:
		f.t.Fatalf("fixture %s %s exited before listening", f.Mode, f.Addr)
	case <-time.After(10 * time.Second):
		f.t.Fatalf("fixture %s %s did not listen within 10s", f.Mode, f.Addr)
	}
}

// Kill ends the fixture's process and waits for it. Killing it twice is
// harmless.
func (f *RemoteFixture) Kill() {
	f.cmd.Process.Kill()
	<-f.done
}

// Restart runs the fixture again, killed or not, on the same address.
func (f *RemoteFixture) Restart() {
	f.t.Helper()
	f.Kill()
	f.start()
}

// URL is the fixture's endpoint.
func (f *RemoteFixture) URL() string {
	if f.Mode == "-sse" {
		return "http://" + f.Addr + "/sse"
	}
	return "http://" + f.Addr + "/mcp"
}
