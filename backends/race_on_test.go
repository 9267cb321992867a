//go:build race

package backends

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
