// tools/call of server-everything's echo: the raw result.
import { rawCall, textOf } from '../lib.mjs';

export default async function run({ client, wire, tool, problems, observed }) {
  const message = 'interop ✓ "quoted" \\ line\nbreak';
  observed.call = await rawCall(client, wire, tool('echo'), { message });
  if (textOf(observed.call) !== `Echo: ${message}`) {
    problems.push(`echo returned ${JSON.stringify(observed.call)}`);
  }
}
