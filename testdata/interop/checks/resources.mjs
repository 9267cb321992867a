// resources/list, resources/templates/list and resources/read of every
// listed resource, raw. A target's own resources (mcp-mux://) are set apart.
import { allPages } from '../lib.mjs';

const own = (r) => r.uri?.startsWith('mcp-mux://');

export default async function run({ client, wire, problems, observed }) {
  const resources = await allPages(client, wire, 'resources/list', 'resources');
  observed.resources = resources.filter((r) => !own(r));
  observed.ownURIs = resources.filter(own).map((r) => r.uri);
  observed.templates = await allPages(client, wire, 'resources/templates/list', 'resourceTemplates');
  observed.reads = {};
  for (const r of observed.resources) {
    await client.readResource({ uri: r.uri }).catch(() => {});
    observed.reads[r.uri] = wire.lastResponse('resources/read');
  }
  if (observed.resources.length === 0) problems.push('no resources');
  for (const [uri, raw] of Object.entries(observed.reads)) {
    if (!raw?.result?.contents?.length) problems.push(`read ${uri}: ${JSON.stringify(raw)}`);
  }
}
