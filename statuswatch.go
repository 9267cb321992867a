package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
)

// status --watch. On a terminal it is a screen redrawn in place each
// second, which q, Esc or Ctrl-C leaves (the last status stays printed);
// off one (a pipe, a file) the status is printed again each second, plain,
// until a signal ends it.
//
// It draws with a few escape sequences itself, not with bubbletea: that
// library's package init asks the terminal for its background colour and
// cursor position in every process it is linked into, which would have
// mcp-mux query, and wait on, a terminal that does not answer whatever
// command it runs (see mux/e2e/terminal_linux_test.go). This never asks
// the terminal anything.

const (
	altScreen  = "\x1b[?1049h\x1b[?25l" // the alternate screen, the cursor hidden
	mainScreen = "\x1b[?25h\x1b[?1049l"
	home       = "\x1b[H"
	clearEOL   = "\x1b[K"
	clearBelow = "\x1b[J"
)

func watchStatus(pid int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	in, out := int(os.Stdin.Fd()), int(os.Stdout.Fd())
	if !term.IsTerminal(out) || !term.IsTerminal(in) {
		return watchPlain(ctx, pid)
	}
	restoreOut, err := enableEscapes(os.Stdout)
	if err != nil {
		return watchPlain(ctx, pid) // a console that cannot draw in place
	}
	defer restoreOut()
	old, err := term.MakeRaw(in)
	if err != nil {
		return fmt.Errorf("status --watch: %w", err)
	}
	defer term.Restore(in, old)
	// The keys are read in a goroutine that ends with the process: a read
	// of the terminal cannot be interrupted, and the command ends when the
	// screen does.
	quit := make(chan struct{})
	go func() {
		b := make([]byte, 64)
		for {
			n, err := os.Stdin.Read(b)
			if err != nil {
				return
			}
			// Esc alone: an arrow key sends Esc and more in one read.
			if n == 1 && b[0] == 0x1b || strings.ContainsAny(string(b[:n]), "qQ\x03\x04") { // Ctrl-C, Ctrl-D
				close(quit)
				return
			}
		}
	}()
	os.Stdout.WriteString(altScreen)
	var last string
	defer func() {
		os.Stdout.WriteString(mainScreen)
		// The last status stays on the terminal, as plain lines.
		term.Restore(in, old)
		os.Stdout.WriteString(last)
	}()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		last = statusText(pid, true)
		width, height, err := term.GetSize(out)
		if err != nil {
			width, height = 0, 0
		}
		frame := fmt.Sprintf("mcp-mux status at %s (every second; q quits)\n\n", time.Now().Format(time.TimeOnly)) + last
		os.Stdout.WriteString(home + screenLines(frame, width, height) + clearBelow)
		select {
		case <-ctx.Done():
			return nil
		case <-quit:
			return nil
		case <-t.C:
		}
	}
}

// watchPlain prints the status each second until ctx ends.
func watchPlain(ctx context.Context, pid int) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		fmt.Fprintf(os.Stdout, "--- %s\n%s", time.Now().Format(time.TimeOnly), statusText(pid, false))
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// statusText is one round of status as text; the problems go to stderr,
// or into the text for the screen (stderr would be drawn over).
func statusText(pid int, screen bool) string {
	docs, problems := collectStatus(pid)
	var sb strings.Builder
	writeStatus(&sb, docs)
	for _, p := range problems {
		if screen {
			sb.WriteString("! " + printable(p) + "\n")
		} else {
			fmt.Fprintln(os.Stderr, "mcp-mux: status: "+p)
		}
	}
	return sb.String()
}

// screenLines is text for a raw terminal of width × height (0: unknown):
// each line cut to the width, so that none wraps and moves the next,
// cleared to its end, and ended by CR LF; as many lines as fit.
func screenLines(text string, width, height int) string {
	var sb strings.Builder
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if height > 0 && len(lines) > height {
		lines = lines[:height]
	}
	for i, l := range lines {
		if r := []rune(l); width > 0 && len(r) >= width {
			l = string(r[:width-1])
		}
		sb.WriteString(l + clearEOL)
		if i < len(lines)-1 {
			sb.WriteString("\r\n")
		}
	}
	return sb.String()
}
