//go:build !linux

// The benchmark reads every process's CPU time and peak RSS from /proc.
package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	fmt.Fprintf(os.Stderr, "bench: measures processes through /proc, which Linux has and %s does not\n", runtime.GOOS)
	os.Exit(1)
}
