// Package supervisor is what runs between mcp-mux and each backend on
// Linux: mcp-mux's own executable run again with argv[0] launch.Arg0.
// Package launch starts the backend early in the program's initialization;
// this package's init then supervises it until it exits. It imports
// nothing but the standard library and package launch, so that its init
// runs before those of mcp-mux's dependencies: a supervisor does not pay
// for them at every backend start.
package supervisor
