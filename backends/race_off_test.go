//go:build !race

package backends

const raceEnabled = false
