package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/mcp-mux/mcp-mux/mux"
)

// reloadOnSIGHUP reloads m's config on every SIGHUP until the returned stop
// is called. Windows has no SIGHUP: there it never comes, and the watcher
// alone reloads.
func reloadOnSIGHUP(m *mux.Mux) (stop func()) {
	return onSIGHUP(func() { m.Reload() }) // logs what it did, or why not
}

// forwardSIGHUP passes every SIGHUP a session gets to the shared process it
// relays to (pid, which a restart of that process changes): the user, or a
// script, signals the process the agent launched, and the shared process
// reloads. Without it the signal ended the session.
func forwardSIGHUP(pid func() int) (stop func()) {
	return onSIGHUP(func() {
		if p, err := os.FindProcess(pid()); err == nil {
			p.Signal(syscall.SIGHUP)
		}
	})
}

// onSIGHUP runs do for every SIGHUP, one at a time, until stop.
func onSIGHUP(do func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-ch:
				do()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
		<-ended
	}
}
