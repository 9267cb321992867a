// Subscriptions with server-everything: when its toggle-subscriber-updates
// tool turns updates on, it sends notifications/resources/updated for each
// subscribed URI at once, in the order they were subscribed (then every
// 5 s, until turned off). Subscribed to two URIs, the toggle brings an
// update for each; after unsubscribing the first, turning updates off and
// on again brings one for the second (the control, which also marks the
// end of the wait) and none for the first.
import { rawCall, serverStream } from '../lib.mjs';

const uri = 'demo://resource/static/document/architecture.md';
const control = 'demo://resource/static/document/features.md';
const updateWaitMs = 3000;

const updateOf = (u) => (m) => m.dir === 'in' && m.msg.method === 'notifications/resources/updated' && m.msg.params?.uri === u;

export default async function run({ client, wire, target, tool, problems, observed }) {
  // Over HTTP the update travels on the client's GET stream: a server
  // drops what it sends before that stream is open.
  if (target.url && !(await serverStream(wire))) problems.push('the server never answered the GET stream');
  const toggle = async (what) => {
    const r = await rawCall(client, wire, tool('toggle-subscriber-updates'), {});
    if (!r.result || r.result.isError) problems.push(`toggle-subscriber-updates (${what}): ${JSON.stringify(r)}`);
  };
  await client.subscribeResource({ uri });
  await client.subscribeResource({ uri: control });

  let mark = wire.messages.length;
  await toggle('on');
  for (const u of [uri, control]) {
    const got = await wire.waitFor(updateOf(u), updateWaitMs, mark);
    if (!got) problems.push(`subscribed: no notifications/resources/updated for ${u} within ${updateWaitMs} ms of toggle-subscriber-updates`);
  }
  observed.whileSubscribed = wire.messages.slice(mark).filter((m) => updateOf(uri)(m) || updateOf(control)(m)).map((m) => m.msg.params);

  await client.unsubscribeResource({ uri });
  await toggle('off');
  mark = wire.messages.length;
  await toggle('on');
  const got = await wire.waitFor(updateOf(control), updateWaitMs, mark);
  if (!got) problems.push(`still subscribed: no notifications/resources/updated for ${control} within ${updateWaitMs} ms`);
  observed.afterUnsubscribe = wire.messages.slice(mark).filter(updateOf(uri)).length;
  if (observed.afterUnsubscribe > 0) problems.push(`${observed.afterUnsubscribe} notifications/resources/updated for ${uri} after unsubscribe`);
  await toggle('off');
  await client.unsubscribeResource({ uri: control });
}
