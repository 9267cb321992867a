// Cancellation: the client aborts a long-running tools/call; it sends
// notifications/cancelled, and no response for that request may arrive
// (the receiver of a cancellation sends none). The session goes on working.
import { rawCall, sleep, textOf } from '../lib.mjs';

const durationS = 2;
const abortAfterMs = 500;
const reason = 'interop: the user pressed stop';

export default async function run({ client, wire, tool, problems, observed }) {
  const ac = new AbortController();
  const call = client
    .callTool({ name: tool('trigger-long-running-operation'), arguments: { duration: durationS, steps: 2 } }, undefined, { signal: ac.signal })
    .then(() => 'resolved', (e) => `rejected: ${e.message}`);
  await sleep(abortAfterMs);
  ac.abort(reason);
  observed.callOutcome = await call;
  const req = wire.outgoing().find((m) => m.method === 'tools/call');
  const cancelled = wire.outgoing().find((m) => m.method === 'notifications/cancelled');
  observed.cancelledSent = cancelled?.params ?? null;
  if (!cancelled || cancelled.params.requestId !== req.id) problems.push(`the client sent no notifications/cancelled for ${req.id}`);

  // Past the operation's end, with room to spare.
  await sleep(durationS * 1000 + 1000);
  const late = wire.incoming().filter((m) => m.id === req.id && m.method === undefined);
  observed.responsesAfterCancel = late;
  if (late.length) problems.push(`response(s) to the cancelled request arrived: ${JSON.stringify(late)}`);

  const echo = await rawCall(client, wire, tool('echo'), { message: 'still there' });
  if (textOf(echo) !== 'Echo: still there') problems.push(`echo after the cancel: ${JSON.stringify(echo)}`);
}
