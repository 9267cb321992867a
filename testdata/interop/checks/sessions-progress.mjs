// Two clients at once over mcp-mux serve --http (target.url), with
// server-everything as a backend (prefix target.prefixes.ev). Both call its
// long-running tool at the same time under the SAME progress token (each
// client's own token space: two agents easily pick the same one), A with 3
// steps, B with 5. Each session gets exactly its own request's progress,
// 1..n of n under its token; none of the other's. Counted on the wire,
// after a moment for stragglers; those that came after the response are
// in observed.lateProgress.
import { textOf, until } from '../lib.mjs';

const token = 'interop-same-token';
const lateMs = 1000;

// longCall calls the long-running tool with the token in _meta, set by
// hand: given onprogress, the SDK would use its request id instead. It
// returns the request's id.
async function longCall(s, ev, steps) {
  const name = ev + 'trigger-long-running-operation';
  await s.client.callTool({ name, arguments: { duration: 1, steps }, _meta: { progressToken: token } }).catch(() => {});
  return s.wire.outgoing().find((m) => m.method === 'tools/call' && m.params?.name === name).id;
}

const progressOf = (s) => s.wire.messages.map((m, i) => ({ ...m, i })).filter((m) => m.dir === 'in' && m.msg.method === 'notifications/progress');

export default async function run(ctx) {
  const { target, problems, observed } = ctx;
  const { ev } = target.prefixes;
  const A = { name: 'A', client: ctx.client, wire: ctx.wire, steps: 3 };
  const B = { name: 'B', ...(await ctx.connect({ name: 'interop-B' })), steps: 5 };
  const ids = await Promise.all([longCall(A, ev, A.steps), longCall(B, ev, B.steps)]);
  // A progress notification late or on another stream would come after
  // the response: give stragglers a moment, to tell late from lost.
  await until(() => progressOf(A).length >= A.steps && progressOf(B).length >= B.steps, lateMs);
  for (const [s, id] of [[A, ids[0]], [B, ids[1]]]) {
    const progress = progressOf(s);
    const respAt = s.wire.messages.findIndex((m) => m.dir === 'in' && m.msg.id === id && m.msg.method === undefined);
    observed[s.name] = progress.map((m) => m.msg.params);
    const got = observed[s.name].map((p) => [p.progress, p.total, p.progressToken]);
    const want = Array.from({ length: s.steps }, (_, i) => [i + 1, s.steps, token]);
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      problems.push(`${s.name} (${s.steps} steps) got progress ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    }
    // Judged by the Go test (a known gap of mcp-mux over HTTP): which
    // progress notifications came after the response.
    const late = progress.filter((m) => respAt >= 0 && m.i > respAt).map((m) => m.msg.params.progress);
    if (late.length) observed.lateProgress = [...(observed.lateProgress ?? []), `${s.name}: ${JSON.stringify(late)} of ${s.steps}`];
    const raw = s.wire.responseTo(id);
    if (!textOf(raw).startsWith('Long running operation completed')) problems.push(`${s.name}: result ${JSON.stringify(raw)}`);
  }
}
