// Logging: after logging/setLevel debug, server-everything's
// toggle-simulated-logging makes it send notifications/message at once
// (then every 5 s, until toggled off).
import { rawCall } from '../lib.mjs';

const waitMs = 3000;
const simulated = /(Debug|Info|Notice|Warning|Error|Critical|Emergency)-level message|Alert level-message/;

export default async function run({ client, wire, tool, problems, observed }) {
  const mark = wire.messages.length;
  await client.setLoggingLevel('debug').catch(() => {});
  observed.setLevel = wire.lastResponse('logging/setLevel');
  if (!observed.setLevel || observed.setLevel.error) problems.push(`logging/setLevel: ${JSON.stringify(observed.setLevel)}`);

  const on = await rawCall(client, wire, tool('toggle-simulated-logging'), {});
  if (!on.result || on.result.isError) problems.push(`toggle-simulated-logging: ${JSON.stringify(on)}`);
  const got = await wire.waitFor(
    (m) => m.dir === 'in' && m.msg.method === 'notifications/message' && simulated.test(String(m.msg.params?.data)),
    waitMs,
    mark,
  );
  await rawCall(client, wire, tool('toggle-simulated-logging'), {});
  observed.messages = wire.notifications('notifications/message').map((m) => m.params);
  if (!got) problems.push(`no simulated notifications/message within ${waitMs} ms of toggle-simulated-logging`);
}
