// prompts/list, raw, with the target's prefix taken off the names, and
// prompts/get of each prompt that needs no argument or has its arguments
// below: the raw results. The Go test compares them with the bare server's.
// (resource-prompt is left out: its text carries the time of day.)
import { allPages } from '../lib.mjs';

const args = {
  'args-prompt': { city: 'Lisbon', state: 'Lisboa' },
  'completable-prompt': { department: 'Engineering', name: 'Alice' },
};

export default async function run({ client, wire, target, problems, observed }) {
  const prefix = target.prefix ?? '';
  const prompts = await allPages(client, wire, 'prompts/list', 'prompts');
  observed.prompts = prompts
    .filter((p) => p.name.startsWith(prefix))
    .map((p) => ({ ...p, name: p.name.slice(prefix.length) }));
  observed.otherNames = prompts.filter((p) => !p.name.startsWith(prefix)).map((p) => p.name);
  if (observed.prompts.length === 0) problems.push(`no prompt named ${prefix}*`);
  observed.gets = {};
  for (const p of observed.prompts) {
    const required = (p.arguments ?? []).some((a) => a.required);
    if (required && !args[p.name]) continue;
    await client.getPrompt({ name: prefix + p.name, arguments: args[p.name] ?? {} }).catch(() => {});
    observed.gets[p.name] = wire.lastResponse('prompts/get');
    if (!observed.gets[p.name]?.result?.messages?.length) problems.push(`prompts/get ${p.name}: ${JSON.stringify(observed.gets[p.name])}`);
  }
}
