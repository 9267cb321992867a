// tools/call with state: server-memory's create_entities, then read_graph.
// The memory file is new for each run, so both results are deterministic.
import { rawCall, textOf } from '../lib.mjs';

export const entities = [
  { name: 'mcp-mux', entityType: 'program', observations: ['multiplexes MCP servers'] },
  { name: 'interop', entityType: 'test', observations: ['runs the TypeScript client'] },
];

export default async function run({ client, wire, tool, problems, observed }) {
  observed.create = await rawCall(client, wire, tool('create_entities'), { entities });
  observed.read = await rawCall(client, wire, tool('read_graph'), {});
  for (const e of entities) {
    if (!textOf(observed.read).includes(`"${e.name}"`)) problems.push(`read_graph lacks ${e.name}: ${textOf(observed.read)}`);
  }
}
