//go:build !unix

package search

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
