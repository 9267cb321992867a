// Package catalogmem remembers what each backend offered, from one run of
// mcp-mux to the next: its serverInfo, protocol version, capabilities,
// instructions, and its tools, prompts, resources and resource templates
// whole, as the backend sent them (their _meta included).
//
// With it the catalog is known before the backends run: an agent's first
// list can be complete at once, and a backend need only be started when
// something of it is used. A backend whose catalog changed since is seen
// as it now is once it runs, and remembered so from then on. A start that
// failed is noted beside the catalog (NoteFailure), when and why, until a
// start works: what a remembered catalog promises may no longer hold.
//
// What a backend offers may depend on its client's capabilities (a tool
// that asks the client for sampling is listed only to a client that has
// it), so a catalog is remembered with those it was offered to (Shape),
// and one per set of them, up to maxVariants: LookupFor finds the one
// for a client's.
//
// A backend is remembered by its Identity, everything that makes it: a
// change of any field is another backend. Env and header values are
// secrets, so they never reach a file: only their hashes go into the
// key, which is itself a hash, and the file holds nothing else of the
// Identity but the backend's name; a failure's reason has them hidden.
//
// The files live in a directory of the user's cache directory
// (DefaultPath), one per backend, named by its key. A process reads only
// the files of the backends it looks up, so that its memory is that of
// its own backends, not of every config's. Several mcp-mux processes
// share the directory: each write replaces one backend's file whole, so
// two processes that see the same backend both write what it offered, and
// the last one stays. A damaged file is as good as none.
package catalogmem
