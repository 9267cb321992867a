// Roots with server-filesystem started without directories: it asks the
// client for roots/list and allows exactly those; after
// notifications/roots/list_changed it asks again and allows the new ones.
// target.dirs: two existing directories (absolute, symlinks resolved).
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { pathToFileURL } from 'node:url';
import { rawCall, sleep, textOf } from '../lib.mjs';

export const capabilities = { roots: { listChanged: true } };

let current = [];

export function setup(client, { target }) {
  current = [target.dirs[0]];
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: current.map((d, i) => ({ uri: pathToFileURL(d).href, name: `root${i}` })),
  }));
}

// allowed polls list_allowed_directories until want(text), or until ms
// after the first answer: the first call may wait for a slow start.
async function allowed(client, wire, tool, want, ms) {
  let deadline;
  for (;;) {
    const text = textOf(await rawCall(client, wire, tool('list_allowed_directories'), {}));
    deadline ??= Date.now() + ms;
    if (want(text) || Date.now() > deadline) return text;
    await sleep(100);
  }
}

const dirsIn = (text) => text.split('\n').slice(1).filter(Boolean);

export default async function run({ client, wire, target, tool, problems, observed }) {
  const [a, b] = target.dirs;
  observed.before = dirsIn(await allowed(client, wire, tool, (t) => dirsIn(t).includes(a), 3000));
  if (JSON.stringify(observed.before) !== JSON.stringify([a])) {
    problems.push(`allowed directories ${JSON.stringify(observed.before)}, want the client's root [${a}]`);
  }

  current = [b];
  const mark = wire.messages.length;
  await client.sendRootsListChanged();
  observed.after = dirsIn(await allowed(client, wire, tool, (t) => dirsIn(t).includes(b), 3000));
  if (JSON.stringify(observed.after) !== JSON.stringify([b])) {
    problems.push(`after roots/list_changed, allowed directories ${JSON.stringify(observed.after)}, want [${b}]`);
  }
  observed.rootsRequests = wire.requests('roots/list').length;
  observed.rootsRequestsAfterChange = wire.messages.slice(mark).filter((m) => m.dir === 'in' && m.msg.method === 'roots/list').length;
}
