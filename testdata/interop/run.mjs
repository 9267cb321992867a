// Runs one named interop check against one target and prints one JSON
// object on stdout:
//
//   node run.mjs CHECK 'TARGET-JSON'
//
// TARGET-JSON: {"name": "mux" | "bare", "command": ..., "args": [...],
// "env": {...}, "prefix": "ev__" (what the target puts before the server's
// tool names; "" for a bare server), "timeoutMs": 20000, plus what a check
// needs (e.g. "dirs" for roots; "prefixes", by backend, and "spyLog", the
// file spy.mjs writes, for the checks of several sessions)}.
//
// Output: {"check", "target", "ok", "problems": [...], "observed": {...},
// "pid", "ms"}. ok is the check's own verdict on what a client needs to see;
// observed carries what the Go test compares between mux and bare. The exit
// status is 0 whenever a result was printed (ok or not), 2 on a timeout, 1
// on a crash. The check's child process is stopped before exit, whatever
// happens.
//
// A check is checks/NAME.mjs exporting `capabilities` (the client's, default
// none), optionally `setup(client, ctx)` (request handlers, registered
// before initialize), and `default async function run(ctx)` where ctx is
// { client, wire, target, tool(name), problems, observed, connect() }.
// connect() opens one more session to the same target (for checks of
// several clients at once; mostly with target.url): { client, transport,
// wire }, ended with the check like the first one.
//
// A target with "url" instead of "command" is reached over Streamable HTTP
// (a remote server, or mcp-mux serve --http); the Go test runs it, and at
// the end each session is ended with an HTTP DELETE. "noGET": the client
// opens no GET stream. "muxPIDs": observed.backendPIDs gets the pids of
// mcp-mux's backends.

import { backendPIDs, connect, disconnect, Wire } from './lib.mjs';

const [name, targetJSON] = process.argv.slice(2);
if (!name || !/^[a-z0-9-]+$/.test(name) || !targetJSON) {
  console.error("usage: node run.mjs CHECK 'TARGET-JSON'");
  process.exit(64);
}
const target = JSON.parse(targetJSON);
const started = Date.now();
let printed = false;

function print(result) {
  if (printed) return;
  printed = true;
  process.stdout.write(
    JSON.stringify({
      check: name,
      target: target.name,
      pid: ctx.transport?.pid ?? ctx.pid ?? 0,
      ms: Date.now() - started,
      ...result,
    }) + '\n',
  );
}

function killChild() {
  const pid = ctx.transport?.pid;
  if (pid) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

const more = []; // the sessions ctx.connect opened
const ctx = {
  target,
  problems: [],
  observed: {},
  wire: new Wire(),
  tool: (n) => (target.prefix ?? '') + n,
  connect: async (opts = {}) => {
    const wire = new Wire(ctx.wire.t0);
    const s = await connect(target, { ...opts, wire });
    more.push({ ...s, name: opts.name ?? `session ${more.length + 2}` });
    return s;
  },
};
// verdict is the result; a failed one carries the last messages on the
// wire, which is what it takes to see where a difference comes from (with
// several sessions, all of them, in time order, each direction prefixed
// with the session's client name).
function verdict(ctx) {
  const ok = ctx.problems.length === 0;
  const r = { ok, problems: ctx.problems, observed: ctx.observed };
  if (!ok && ctx.wire) {
    if (more.length === 0) r.wire = ctx.wire.messages.slice(-40);
    else {
      const all = [{ name: 'first', wire: ctx.wire }, ...more].flatMap((s) => s.wire.messages.map((m) => ({ ...m, dir: `${s.name} ${m.dir}` })));
      r.wire = all.sort((a, b) => a.at - b.at).slice(-80);
    }
  }
  return r;
}

// muxPIDs: for a target.muxPIDs (mcp-mux serve --http, which the Go test
// runs), its backends' pids, which must be gone once it is. Asked through
// the first session still open.
async function muxPIDs() {
  for (const s of [ctx, ...more]) {
    try {
      return await backendPIDs(s.client);
    } catch {
      // that session was ended by the check
    }
  }
  return [];
}

const timer = setTimeout(() => {
  ctx.problems.push(`timed out after ${target.timeoutMs ?? 20000} ms`);
  print(verdict(ctx));
  killChild();
  process.exit(2);
}, target.timeoutMs ?? 20000);

const mod = await import(`./checks/${name}.mjs`);
try {
  Object.assign(
    ctx,
    await connect(target, {
      capabilities: mod.capabilities,
      setup: (client) => mod.setup?.(client, ctx),
      wire: ctx.wire,
      onTransport: (t) => {
        ctx.transport = t;
      },
    }),
  );
  ctx.observed.serverInfo = ctx.client.getServerVersion();
  await mod.default(ctx);
  if (target.muxPIDs) ctx.observed.backendPIDs = await muxPIDs();
  print(verdict(ctx));
} catch (e) {
  ctx.problems.push(`check threw: ${e?.stack ?? e}`);
  print(verdict(ctx));
}
// Close as a client does: end stdin, then SIGTERM, then SIGKILL (the SDK
// waits 2 s between steps); over HTTP, DELETE the session. The timer still
// bounds it.
for (const s of more) await disconnect(s).catch(() => {});
try {
  await disconnect(ctx);
} catch {
  killChild();
}
clearTimeout(timer);
process.exit(0);
