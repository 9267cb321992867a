// Package supervisor is what runs between mcp-mux and each backend on
// Linux: mcp-mux's own executable run again with argv[0] Arg0, which this
// package's init recognizes. It imports nothing but the standard library, so
// that its init runs before those of mcp-mux's dependencies: a supervisor
// does not pay for them at every backend start.
package supervisor

// Arg0 is the argv[0] that makes a binary importing this package act as a
// supervisor.
const Arg0 = "mcp-mux-supervisor"

// Launch is what mcp-mux sends the supervisor on the lifeline (fd 3) before
// anything else, gob-encoded (which, unlike JSON, keeps bytes that are not
// UTF-8): the backend's command as os/exec resolved it. It goes over a pipe,
// not argv or the supervisor's environment, so that env values are in the
// backend's environment only. The supervisor answers on fd 4, once:
// "pid N" when the backend runs, or "error MESSAGE".
type Launch struct {
	Path string
	Args []string
	Env  []string
	Dir  string
}
