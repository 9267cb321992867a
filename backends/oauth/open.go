package oauth

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// openSettle is how long an opener is given to fail: one that exits with
// an error within it did not open anything, and the next is tried. One
// still running then (a browser started directly) is taken to work.
const openSettle = 2 * time.Second

// OpenBrowser opens url for the user as xdg-open and Python's webbrowser
// do: with $BROWSER when it is set (a list of commands separated as PATH
// is; "%s" in one stands for the URL, else the URL is its last
// argument), else the OS's opener: open on macOS, rundll32
// url.dll,FileProtocolHandler on Windows, xdg-open elsewhere. Commands are
// run directly, never through a shell.
func OpenBrowser(url string) error {
	var errs []error
	if b := os.Getenv("BROWSER"); b != "" {
		for _, entry := range filepath.SplitList(b) {
			argv := strings.Fields(entry)
			if len(argv) == 0 {
				continue
			}
			replaced := false
			for i := 1; i < len(argv); i++ {
				if strings.Contains(argv[i], "%s") {
					argv[i] = strings.ReplaceAll(argv[i], "%s", url)
					replaced = true
				}
			}
			if !replaced {
				argv = append(argv, url)
			}
			err := start(argv)
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("$BROWSER's %s: %w", argv[0], err))
		}
	}
	var argv []string
	switch runtime.GOOS {
	case "darwin":
		argv = []string{"open", url}
	case "windows":
		argv = []string{"rundll32", "url.dll,FileProtocolHandler", url}
	default:
		argv = []string{"xdg-open", url}
	}
	err := start(argv)
	if err == nil {
		return nil
	}
	errs = append(errs, fmt.Errorf("%s: %w", argv[0], err))
	return errors.Join(errs...)
}

// start runs argv and waits up to openSettle for it to fail.
func start(argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	// Nothing of it reaches the terminal: an opener's chatter is not the
	// user's business, and the URL is printed already.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Start(); err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			return ee.Err
		}
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
		return nil
	case <-time.After(openSettle):
		return nil // still running: a browser, most likely
	}
}
