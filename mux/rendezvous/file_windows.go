//go:build windows

package rendezvous

import (
	"net"
	"os"
)

// File is nil on Windows: a pipe connection is used as it is.
func File(c net.Conn) *os.File { return nil }

// CloseWrite is never called on Windows (File makes no file).
func CloseWrite(f *os.File) error { return nil }

// Hungup is never called on Windows (File makes no file).
func Hungup(f *os.File) bool { return false }
