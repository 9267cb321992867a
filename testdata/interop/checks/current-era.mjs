// A client of the current era (2026-07-28): the TypeScript SDK's v2 client
// pinned to it (server/discover, then the era's _meta on every request; it
// refuses a result without resultType). Through mcp-mux it gets from
// server-everything, which speaks only the handshake era, what the
// handshake-era client of the check gets through another mcp-mux (over
// stdio) or the same one (target.url: serve --http): the same tools, tool
// call, resource reads and prompt. Run against mcp-mux only: the bare server
// does not offer 2026-07-28.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

export default async function run({ client, target, tool, problems, observed }) {
  const transport = target.url
    ? new StreamableHTTPClientTransport(new URL(target.url))
    : new StdioClientTransport({
        command: target.command,
        args: target.args ?? [],
        env: { ...process.env, ...(target.env ?? {}) },
        stderr: 'inherit',
      });
  const modern = new Client({ name: 'mcp-mux-interop-current-era', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await modern.connect(transport);
  const same = (what, now, then) => {
    if (JSON.stringify(now) !== JSON.stringify(then)) {
      problems.push(`${what}: the current era got ${JSON.stringify(now)}, the handshake era ${JSON.stringify(then)}`);
    }
  };
  const attempt = async (what, f) => {
    try {
      return await f();
    } catch (e) {
      problems.push(`${what}: ${e?.message ?? e}`);
      return undefined;
    }
  };
  try {
    observed.version = modern.getNegotiatedProtocolVersion?.();
    observed.server = modern.getServerVersion()?.name;
    const names = (l) => l?.tools?.map((t) => t.name).sort();
    same('tools/list', names(await attempt('tools/list', () => modern.listTools())), names(await client.listTools()));

    const args = { message: 'current era ✓ "quoted"' };
    const now = await attempt('tools/call', () => modern.callTool({ name: tool('echo'), arguments: args }));
    same('tools/call echo', now?.content, (await client.callTool({ name: tool('echo'), arguments: args })).content);

    const resources = (await client.listResources()).resources.slice(0, 3);
    if (resources.length === 0) problems.push('no resource listed');
    for (const r of resources) {
      const read = await attempt(`resources/read ${r.uri}`, () => modern.readResource({ uri: r.uri }));
      same(`resources/read ${r.uri}`, read?.contents, (await client.readResource({ uri: r.uri })).contents);
    }

    const prompt = (await client.listPrompts()).prompts.find((p) => !(p.arguments ?? []).some((a) => a.required));
    if (!prompt) problems.push('no prompt without required arguments');
    else {
      const got = await attempt(`prompts/get ${prompt.name}`, () => modern.getPrompt({ name: prompt.name }));
      same(`prompts/get ${prompt.name}`, got?.messages, (await client.getPrompt({ name: prompt.name })).messages);
    }
  } finally {
    await modern.close();
  }
  if (observed.version !== '2026-07-28') problems.push(`negotiated ${observed.version}, want 2026-07-28`);
}
