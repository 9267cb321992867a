// Package catalogmem remembers what each backend offered, from one run of
// mcp-mux to the next: its serverInfo, protocol version, capabilities,
// instructions, and its tools, prompts, resources and resource templates
// whole, as the backend sent them (their _meta included).
//
// With it the catalog is known before the backends run: an agent's first
// list can be complete at once, and a backend need only be started when
// something of it is used. A backend whose catalog changed since is seen
// as it now is once it runs, and remembered so from then on.
//
// A backend is remembered by its Identity, everything that makes it: a
// change of any field is another backend. Env and header values are
// secrets, so they never reach the file: only their hashes go into the
// key, which is itself a hash, and the file holds nothing else of the
// Identity but the backend's name.
//
// The file lives in the user's cache directory (DefaultPath). Several
// mcp-mux processes share it: each write replaces it whole, and is made
// under a lock from a fresh reading of it, so that no process drops what
// another wrote. A damaged file is as good as none.
package catalogmem
