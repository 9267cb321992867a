// tools/list: every tool of the server, raw, with the target's prefix taken
// off the name. The Go test compares them field by field with the bare
// server's. No client capabilities, so that a server which offers tools by
// capability (server-everything) offers the same set to both.
import { allPages } from '../lib.mjs';

export default async function run({ client, wire, target, problems, observed }) {
  const prefix = target.prefix ?? '';
  const tools = await allPages(client, wire, 'tools/list', 'tools');
  observed.tools = tools
    .filter((t) => t.name.startsWith(prefix))
    .map((t) => ({ ...t, name: t.name.slice(prefix.length) }));
  observed.otherNames = tools.filter((t) => !t.name.startsWith(prefix)).map((t) => t.name);
  if (observed.tools.length === 0) problems.push(`no tool named ${prefix}*`);
}
