package main

import (
	"os"

	"golang.org/x/sys/windows"
)

// enableEscapes turns on the console's processing of escape sequences,
// which Windows consoles leave off, for as long as the screen is drawn.
func enableEscapes(f *os.File) (restore func(), err error) {
	h := windows.Handle(f.Fd())
	var mode uint32
	if err := windows.GetConsoleMode(h, &mode); err != nil {
		return nil, err
	}
	if err := windows.SetConsoleMode(h, mode|windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING); err != nil {
		return nil, err
	}
	return func() { windows.SetConsoleMode(h, mode) }, nil
}
