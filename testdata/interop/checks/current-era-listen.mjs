// subscriptions/listen, the current era's way to subscribe, from the
// TypeScript SDK's v2 client pinned to 2026-07-28, through mcp-mux to
// server-memory, which knows only resources/subscribe (the handshake era):
// the listen is acknowledged with the URI honoured, a mutating call brings
// notifications/resources/updated for it, and once the listen is closed
// another brings none. Run against mcp-mux only: the bare server does not
// offer 2026-07-28.
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { sleep, until } from '../lib.mjs';

const uri = 'memory://knowledge-graph';

export default async function run({ target, tool, problems, observed }) {
  const modern = new Client({ name: 'mcp-mux-interop-current-era', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await modern.connect(
    new StdioClientTransport({ command: target.command, args: target.args ?? [], env: { ...process.env, ...(target.env ?? {}) }, stderr: 'inherit' }),
  );
  let updates = 0;
  modern.setNotificationHandler('notifications/resources/updated', (n) => {
    if (n.params?.uri === uri) updates++;
  });
  const create = (name) => modern.callTool({ name: tool('create_entities'), arguments: { entities: [{ name, entityType: 'test', observations: [] }] } });
  try {
    const sub = await modern.listen({ resourceSubscriptions: [uri] });
    observed.honored = sub.honoredFilter;
    if (!(sub.honoredFilter?.resourceSubscriptions ?? []).includes(uri)) problems.push(`listen did not honour ${uri}: ${JSON.stringify(sub.honoredFilter)}`);
    await create('first');
    await until(() => updates > 0, 3000);
    observed.updatesWhileListening = updates;
    if (updates === 0) problems.push(`no notifications/resources/updated for ${uri} within 3 s of create_entities`);
    await sub.close();
    const before = updates;
    await create('second');
    await sleep(1500);
    observed.updatesAfterClose = updates - before;
    if (updates !== before) problems.push(`${updates - before} update(s) after the listen was closed`);
  } finally {
    await modern.close();
  }
}
