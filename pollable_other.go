//go:build !unix

package main

import "os"

// pollable returns f as it is: Windows has no non-blocking pipes to wait
// on with the runtime's poller.
func pollable(f *os.File) (*os.File, func()) { return f, func() {} }
