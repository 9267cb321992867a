package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcp-mux/mcp-mux/mux"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// progress shows `check --connect` while backends come up (a start can
// take startup_timeout, and an npx backend a minute): one line per backend
// as it is ready or has failed; on a terminal also a status line, redrawn
// in place, of those still starting and for how long. Off a terminal (a
// pipe, a CI log) the status is a line of its own at the start and then
// every stillEvery, so a long start is never silent.
type progress struct {
	w     io.Writer
	live  bool
	start time.Time

	label func(name string) string // backendLabeler's
	goRun map[string]bool          // the backends whose command is `go run`: they compile first

	mu      sync.Mutex
	pending []string // enabled backends not settled yet, in config order

	stop chan struct{}
	done chan struct{}
}

// redrawEvery is how often the live status line's clock moves.
const redrawEvery = 200 * time.Millisecond

// stillEvery is how often, off a terminal, a line says which backends are
// still starting.
const stillEvery = 5 * time.Second

func newProgress(w io.Writer, live bool, cfg *config.File) *progress {
	p := &progress{w: w, live: live, start: time.Now(), label: backendLabeler(cfg), stop: make(chan struct{}), done: make(chan struct{})}
	p.goRun = map[string]bool{}
	for _, b := range cfg.Backends {
		if !b.Disabled {
			p.pending = append(p.pending, b.Name)
			p.goRun[b.Name] = isGoRun(b.Command, b.Args)
		}
	}
	every := redrawEvery
	if !live {
		every = stillEvery
		if len(p.pending) > 0 {
			fmt.Fprintf(w, "starting %s…%s\n", strings.Join(p.pending, ", "), p.compiling())
		}
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.mu.Lock()
				if live {
					p.drawStatus()
				} else if len(p.pending) > 0 {
					fmt.Fprintf(p.w, "still starting %s… %.0fs%s\n", strings.Join(p.pending, ", "), time.Since(p.start).Seconds(), p.compiling())
				}
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// clearLine returns the cursor to the start of the line and erases it.
const clearLine = "\r\x1b[K"

// settled prints s's line (above the status line, on a terminal).
func (p *progress) settled(s mux.BackendStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = slices.DeleteFunc(p.pending, func(n string) bool { return n == s.Name })
	line := settledLine(p.label(s.Name), s, time.Since(p.start))
	if !p.live {
		fmt.Fprintln(p.w, line)
		return
	}
	fmt.Fprint(p.w, clearLine+line+"\n")
	p.drawStatus()
}

// drawStatus redraws the status line; p.mu is held.
func (p *progress) drawStatus() {
	if len(p.pending) == 0 {
		fmt.Fprint(p.w, clearLine)
		return
	}
	fmt.Fprintf(p.w, "%sstarting %s… %.1fs%s", clearLine, strings.Join(p.pending, ", "), time.Since(p.start).Seconds(), p.compiling())
}

// compiling says which of the backends still starting run with `go run`,
// whose first start compiles them (a minute on a fresh machine): a
// status that said only "starting" read as a hang. p.mu is held.
func (p *progress) compiling() string {
	var names []string
	for _, n := range p.pending {
		if p.goRun[n] {
			names = append(names, n)
		}
	}
	switch {
	case len(names) == 0:
		return ""
	case len(names) == len(p.pending) && len(names) == 1:
		return " (go run compiles it first)"
	case len(names) == len(p.pending):
		return " (go run compiles them first)"
	}
	return " (go run compiles " + strings.Join(names, ", ") + " first)"
}

// isGoRun reports whether command and args are `go run …`.
func isGoRun(command string, args []string) bool {
	base := strings.TrimSuffix(strings.ToLower(filepath.Base(command)), ".exe")
	return base == "go" && len(args) > 0 && args[0] == "run"
}

// close stops the redrawing and erases the status line.
func (p *progress) close() {
	close(p.stop)
	<-p.done
	if p.live {
		fmt.Fprint(p.w, clearLine)
	}
}

// settledLine is one backend's line, label its name: what it offers, or
// why it failed.
func settledLine(label string, s mux.BackendStatus, after time.Duration) string {
	if !s.Ready() {
		cause := s.LastError
		if cause == "" {
			cause = "no error recorded"
		}
		return fmt.Sprintf("%s: %s: %s", label, s.State, cause)
	}
	return fmt.Sprintf("%s: ready (%s, %s, %s, %s) after %.1fs", label,
		count(s.Tools, "tool"), count(s.Prompts, "prompt"), count(s.Resources, "resource"), count(s.Templates, "template"), after.Seconds())
}

// backendLabeler names the backends of cfg in check's output: "backend
// notes", and an entry named by its place as every message names it,
// `backend #2 ("notes", a duplicate name)`, not "backend backend #2".
func backendLabeler(cfg *config.File) func(name string) string {
	byPlace := map[string]string{}
	for i := range cfg.Backends {
		if b := &cfg.Backends[i]; b.Renamed != "" {
			byPlace[b.Name] = b.Label()
		}
	}
	return func(name string) string {
		if l, ok := byPlace[name]; ok {
			return l
		}
		return "backend " + name
	}
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// isTerminal reports whether f is a terminal (a character device that is
// not the null device), where the live status line can be redrawn. Not on
// Windows: its console shows the escape sequences unless a program turns
// on their processing, which this one does not.
func isTerminal(f *os.File) bool {
	if runtime.GOOS == "windows" {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return os.Getenv("TERM") != "dumb"
}
