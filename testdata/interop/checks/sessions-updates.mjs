// Two clients at once over mcp-mux serve --http (target.url), with
// server-memory (behind spy.mjs, target.spyLog) and server-everything
// (stdio) as backends, prefixes in target.prefixes {mem, ev}. Updates go
// only to the sessions subscribed to the URI:
//  1. A subscribed to memory://knowledge-graph, B not: B's change to the
//     graph brings A an update and B none.
//  2. A on one server-everything document, B on another: its toggle sends
//     one update per URI; each session gets its own only.
//  3. Both on memory://knowledge-graph: one resources/subscribe reached the
//     backend; a change brings both an update.
//  4. A unsubscribes: the backend is not unsubscribed (B holds it); a change
//     brings B an update and A none.
// "None" is judged quietMs after the update that had to come.
import { rawCall, serverStream, sleep, spied } from '../lib.mjs';

const graph = 'memory://knowledge-graph';
const docA = 'demo://resource/static/document/architecture.md';
const docB = 'demo://resource/static/document/features.md';
const updateWaitMs = 5000;
const quietMs = 1000;

const isUpdate = (uri) => (m) => m.dir === 'in' && m.msg.method === 'notifications/resources/updated' && m.msg.params?.uri === uri;
const count = (wire, from, uri) => wire.messages.slice(from).filter(isUpdate(uri)).length;

export default async function run(ctx) {
  const { target, problems, observed } = ctx;
  const { mem, ev } = target.prefixes;
  const A = { name: 'A', client: ctx.client, wire: ctx.wire };
  const B = { name: 'B', ...(await ctx.connect({ name: 'interop-B' })) };
  for (const s of [A, B]) {
    if (!(await serverStream(s.wire))) problems.push(`${s.name}: mcp-mux never answered the GET stream`);
  }
  const marks = () => [A.wire.messages.length, B.wire.messages.length];
  const change = async (s, what) => {
    const r = await rawCall(s.client, s.wire, mem + 'create_entities', { entities: [{ name: what, entityType: 'test', observations: [] }] });
    if (!r.result || r.result.isError) problems.push(`${s.name}: create_entities: ${JSON.stringify(r)}`);
  };
  // expect waits for each update in must ([session, uri]) since the
  // marks, then quietMs more, and then finds none of those in mustNot.
  const expect = async (step, [ma, mb], must, mustNot) => {
    const since = { A: ma, B: mb };
    for (const [s, uri] of must) {
      if (!(await s.wire.waitFor(isUpdate(uri), updateWaitMs, since[s.name]))) {
        problems.push(`${step}: ${s.name} got no notifications/resources/updated for ${uri} within ${updateWaitMs} ms`);
      }
    }
    if (mustNot.length) await sleep(quietMs);
    observed[step] = [...must, ...mustNot].map(([s, uri]) => ({ session: s.name, uri, updates: count(s.wire, since[s.name], uri) }));
    for (const [s, uri] of mustNot) {
      const n = count(s.wire, since[s.name], uri);
      if (n > 0) problems.push(`${step}: ${s.name} got ${n} notifications/resources/updated for ${uri}, want none`);
    }
  };

  // 1. A subscribed, B not.
  await A.client.subscribeResource({ uri: graph });
  let m = marks();
  await change(B, 'by-B');
  await expect('oneSubscribed', m, [[A, graph]], [[B, graph]]);

  // 2. Different URIs of one backend: each gets its own.
  await A.client.subscribeResource({ uri: docA });
  await B.client.subscribeResource({ uri: docB });
  m = marks();
  const on = await rawCall(A.client, A.wire, ev + 'toggle-subscriber-updates', {});
  if (!on.result || on.result.isError) problems.push(`toggle-subscriber-updates: ${JSON.stringify(on)}`);
  await expect('ownURIOnly', m, [[A, docA], [B, docB]], [[A, docB], [B, docA]]);
  await rawCall(A.client, A.wire, ev + 'toggle-subscriber-updates', {}); // off
  await A.client.unsubscribeResource({ uri: docA });
  await B.client.unsubscribeResource({ uri: docB });

  // 3. Both on one URI: one backend subscribe, both get the update.
  await B.client.subscribeResource({ uri: graph });
  const subs = spied(target.spyLog).filter((e) => e.method === 'resources/subscribe' && e.uri === graph);
  observed.backendSubscribes = subs.length;
  if (subs.length !== 1) problems.push(`two sessions subscribed to ${graph}: the backend got ${subs.length} resources/subscribe, want 1`);
  m = marks();
  await change(A, 'by-A');
  await expect('bothSubscribed', m, [[A, graph], [B, graph]], []);

  // 4. A leaves the URI; B still holds it.
  await A.client.unsubscribeResource({ uri: graph });
  const unsubs = spied(target.spyLog).filter((e) => e.method === 'resources/unsubscribe' && e.uri === graph);
  observed.backendUnsubscribesWhileBHolds = unsubs.length;
  if (unsubs.length) problems.push(`A unsubscribed while B holds ${graph}: the backend got resources/unsubscribe`);
  m = marks();
  await change(A, 'after-A-left');
  await expect('afterAUnsubscribed', m, [[B, graph]], [[A, graph]]);
}
