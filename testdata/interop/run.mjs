// Runs one named interop check against one target and prints one JSON
// object on stdout:
//
//   node run.mjs CHECK 'TARGET-JSON'
//
// TARGET-JSON: {"name": "mux" | "bare", "command": ..., "args": [...],
// "env": {...}, "prefix": "ev__" (what the target puts before the server's
// tool names; "" for a bare server), "timeoutMs": 20000, plus what a check
// needs (e.g. "dirs" for roots)}.
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
// { client, wire, target, tool(name), problems, observed }.

import { connect, Wire } from './lib.mjs';

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

const ctx = {
  target,
  problems: [],
  observed: {},
  wire: new Wire(),
  tool: (n) => (target.prefix ?? '') + n,
};
// verdict is the result; a failed one carries the last messages on the
// wire, which is what it takes to see where a difference comes from.
function verdict(ctx) {
  const ok = ctx.problems.length === 0;
  const r = { ok, problems: ctx.problems, observed: ctx.observed };
  if (!ok && ctx.wire) r.wire = ctx.wire.messages.slice(-40);
  return r;
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
  print(verdict(ctx));
} catch (e) {
  ctx.problems.push(`check threw: ${e?.stack ?? e}`);
  print(verdict(ctx));
}
// Close as a client does: end stdin, then SIGTERM, then SIGKILL (the SDK
// waits 2 s between steps). The timer still bounds it.
try {
  await (ctx.client ?? ctx.transport)?.close();
} catch {
  killChild();
}
clearTimeout(timer);
process.exit(0);
