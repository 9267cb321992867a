// Sessions ending over mcp-mux serve --http (target.url), with server-memory
// behind spy.mjs (target.spyLog, prefix target.prefixes.mem). A and B
// subscribe to memory://knowledge-graph (one resources/subscribe reaches
// the backend); C only watches mcp-mux://backends.
//  1. mcp-mux://backends lists the three sessions, by client name.
//  2. A ends its session (HTTP DELETE): A leaves the sessions list; the
//     backend is not unsubscribed (B holds the URI) and B still gets
//     updates.
//  3. B ends its session, the last holder: the backend gets exactly one
//     resources/unsubscribe for the URI; only C is left in the list.
import { rawCall, readJSON, spied, until } from '../lib.mjs';

const graph = 'memory://knowledge-graph';
const waitMs = 5000;
const names = { A: 'mcp-mux-interop 1.0.0', B: 'interop-B 1.0.0', C: 'interop-C 1.0.0' };

const isUpdate = (m) => m.dir === 'in' && m.msg.method === 'notifications/resources/updated' && m.msg.params?.uri === graph;

export default async function run(ctx) {
  const { target, problems, observed } = ctx;
  const { mem } = target.prefixes;
  const A = { name: 'A', client: ctx.client, wire: ctx.wire, transport: ctx.transport };
  const B = { name: 'B', ...(await ctx.connect({ name: 'interop-B' })) };
  const C = { name: 'C', ...(await ctx.connect({ name: 'interop-C' })) };
  const clients = async () => (await readJSON(C.client, 'mcp-mux://backends')).sessions.map((s) => s.client).sort();
  const spiedOn = (method) => spied(target.spyLog).filter((e) => e.method === method && e.uri === graph);

  observed.sessionsAtStart = await clients();
  for (const n of Object.values(names)) {
    if (!observed.sessionsAtStart.includes(n)) problems.push(`mcp-mux://backends sessions lack ${n}: ${JSON.stringify(observed.sessionsAtStart)}`);
  }

  await A.client.subscribeResource({ uri: graph });
  await B.client.subscribeResource({ uri: graph });
  observed.backendSubscribes = spiedOn('resources/subscribe').length;
  if (observed.backendSubscribes !== 1) problems.push(`the backend got ${observed.backendSubscribes} resources/subscribe for two sessions on ${graph}, want 1`);

  // 2. A leaves.
  await A.transport.terminateSession();
  observed.sessionsAfterA = await until(async () => {
    const c = await clients();
    return !c.includes(names.A) && c;
  }, waitMs);
  if (!observed.sessionsAfterA) problems.push(`A's session still in mcp-mux://backends ${waitMs} ms after its DELETE: ${JSON.stringify(await clients())}`);
  else if (!observed.sessionsAfterA.includes(names.B)) problems.push(`B's session gone with A's: ${JSON.stringify(observed.sessionsAfterA)}`);
  observed.backendUnsubscribesWhileBHolds = spiedOn('resources/unsubscribe').length;
  if (observed.backendUnsubscribesWhileBHolds) problems.push(`A left while B holds ${graph}: the backend got resources/unsubscribe`);
  const mark = B.wire.messages.length;
  const r = await rawCall(C.client, C.wire, mem + 'create_entities', { entities: [{ name: 'after-A-left', entityType: 'test', observations: [] }] });
  if (!r.result || r.result.isError) problems.push(`create_entities: ${JSON.stringify(r)}`);
  if (!(await B.wire.waitFor(isUpdate, waitMs, mark))) problems.push(`after A left, B got no notifications/resources/updated for ${graph} within ${waitMs} ms`);

  // 3. B, the last holder, leaves.
  await B.transport.terminateSession();
  const unsub = await until(() => spiedOn('resources/unsubscribe').length > 0, waitMs);
  if (!unsub) problems.push(`the last holder of ${graph} left: the backend got no resources/unsubscribe within ${waitMs} ms`);
  observed.sessionsAtEnd = await until(async () => {
    const c = await clients();
    return c.length === 1 && c;
  }, waitMs);
  if (JSON.stringify(observed.sessionsAtEnd) !== JSON.stringify([names.C])) {
    problems.push(`mcp-mux://backends sessions after A and B left: ${JSON.stringify(await clients())}, want only C's`);
  }
  observed.backendUnsubscribes = spiedOn('resources/unsubscribe').length;
  if (observed.backendUnsubscribes !== 1) problems.push(`the backend got ${observed.backendUnsubscribes} resources/unsubscribe, want 1`);
}
