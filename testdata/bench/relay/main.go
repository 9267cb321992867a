// Command relay runs CMD ARGS and copies bytes both ways between its own
// stdin/stdout and the child's, parsing nothing; the child's stderr is its
// own. It is the floor of one extra hop in the benchmark (testdata/bench):
// what any process between an agent and a server costs at the least.
//
//	relay CMD [ARGS...]
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: relay CMD [ARGS...]")
		os.Exit(2)
	}
	// A reader of our stdout that went away must end the relay through
	// the copy's error, after the child is reaped, not through SIGPIPE,
	// which would leave the child to an init that may not reap it.
	signal.Ignore(syscall.SIGPIPE)
	os.Exit(run(os.Args[1], os.Args[2:]))
}

func run(name string, args []string) int {
	// Pipes of our own rather than cmd.StdinPipe/StdoutPipe: Wait must not
	// close the child's stdout under the copy that is still draining it.
	inR, inW, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	inR.Close()
	outW.Close()

	stdinDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(inW, os.Stdin)
		inW.Close() // the child sees EOF when we do
		close(stdinDone)
	}()
	stdoutDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(os.Stdout, outR)
		close(stdoutDone)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Either side ending ends the relay: stdin EOF gives the child a moment
	// to exit on its own EOF; the child's end is ours.
	select {
	case <-stdinDone:
		select {
		case <-stdoutDone:
		case <-time.After(5 * time.Second):
		}
	case <-stdoutDone:
	}
	select {
	case err = <-exited:
	case <-time.After(2 * time.Second):
		_ = cmd.Process.Kill()
		err = <-exited
	}
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return max(ee.ExitCode(), 1)
	}
	return 0
}
