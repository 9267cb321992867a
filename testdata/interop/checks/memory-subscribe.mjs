// Subscriptions with server-memory: subscribed, a mutating tool call brings
// notifications/resources/updated for memory://knowledge-graph; after
// unsubscribe, another one brings none (within a bounded wait).
import { rawCall } from '../lib.mjs';

const uri = 'memory://knowledge-graph';
const updateWaitMs = 3000; // for one that should arrive
const quietMs = 1500; // for none to arrive

function updatesSince(wire, i) {
  return wire.messages
    .slice(i)
    .filter((m) => m.dir === 'in' && m.msg.method === 'notifications/resources/updated' && m.msg.params?.uri === uri);
}

export default async function run({ client, wire, tool, problems, observed }) {
  await client.subscribeResource({ uri });

  let mark = wire.messages.length;
  const call1 = await rawCall(client, wire, tool('create_entities'), {
    entities: [{ name: 'first', entityType: 'test', observations: [] }],
  });
  if (!call1.result || call1.result.isError) problems.push(`create_entities: ${JSON.stringify(call1)}`);
  const got = await wire.waitFor(
    (m) => m.dir === 'in' && m.msg.method === 'notifications/resources/updated' && m.msg.params?.uri === uri,
    updateWaitMs,
    mark,
  );
  observed.updatesWhileSubscribed = updatesSince(wire, mark).length;
  // server-memory sends the update before the call's response; record
  // whether the target kept that order.
  const resp = wire.messages.findIndex((m, i) => i >= mark && m.dir === 'in' && m.msg.id !== undefined && m.msg.method === undefined);
  const upd = wire.messages.findIndex((m, i) => i >= mark && m.dir === 'in' && m.msg.method === 'notifications/resources/updated');
  observed.updateBeforeResponse = upd >= 0 && upd < resp;
  if (!got) problems.push(`no notifications/resources/updated for ${uri} within ${updateWaitMs} ms of create_entities`);

  await client.unsubscribeResource({ uri });
  mark = wire.messages.length;
  const call2 = await rawCall(client, wire, tool('create_entities'), {
    entities: [{ name: 'second', entityType: 'test', observations: [] }],
  });
  if (!call2.result || call2.result.isError) problems.push(`create_entities: ${JSON.stringify(call2)}`);
  await new Promise((r) => setTimeout(r, quietMs));
  observed.updatesAfterUnsubscribe = updatesSince(wire, mark).length;
  if (observed.updatesAfterUnsubscribe > 0) {
    problems.push(`${observed.updatesAfterUnsubscribe} notifications/resources/updated after unsubscribe`);
  }
}
