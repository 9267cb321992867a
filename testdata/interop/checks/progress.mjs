// Progress: a tools/call with a progress token to server-everything's
// long-running tool brings one notifications/progress per step, under the
// client's token, in order. Counted on the wire (the SDK's callback can
// miss one that arrives just before the response), after a moment for
// stragglers: those that came after the response are in observed.late,
// for the Go test to judge (the server sends each before the response).
import { rawCall, textOf, until } from '../lib.mjs';

const steps = 4;
const lateMs = 1000;

export default async function run({ client, wire, tool, problems, observed }) {
  let callbacks = 0;
  const raw = await rawCall(client, wire, tool('trigger-long-running-operation'), { duration: 1, steps }, {
    onprogress: () => callbacks++,
  });
  const progressOf = () =>
    wire.messages.map((m, i) => ({ ...m, i })).filter((m) => m.dir === 'in' && m.msg.method === 'notifications/progress');
  await until(() => progressOf().length >= steps, lateMs);
  const req = wire.outgoing().find((m) => m.method === 'tools/call');
  const token = req.params._meta?.progressToken;
  const respAt = wire.messages.findIndex((m) => m.dir === 'in' && m.msg.id === req.id && m.msg.method === undefined);
  const progress = progressOf();
  observed.token = token;
  observed.progress = progress.map((m) => m.msg.params);
  observed.callbacks = callbacks;
  observed.late = progress.filter((m) => respAt >= 0 && m.i > respAt).map((m) => m.msg.params.progress);
  const got = observed.progress.map((p) => [p.progress, p.total, p.progressToken]);
  const want = Array.from({ length: steps }, (_, i) => [i + 1, steps, token]);
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    problems.push(`progress ${JSON.stringify(observed.progress)}, want ${JSON.stringify(want)}`);
  }
  if (!textOf(raw).startsWith('Long running operation completed')) problems.push(`result: ${JSON.stringify(raw)}`);
}
