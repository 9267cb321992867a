// A client's input asked by a server of the handshake era, in both eras:
// server-everything's trigger-sampling-request, trigger-elicitation-request
// and get-roots-list ask the client (sampling/createMessage,
// elicitation/create, roots/list) inside the tools/call. The handshake-era
// client of the harness (SDK 1.32.2) answers them as requests; the
// TypeScript SDK's v2 client pinned to 2026-07-28 answers them in the
// input rounds mcp-mux makes of them (input_required, then the retry),
// through the same handlers. observed.handshake and observed.current are
// the tools' texts each got; the bare server does not offer 2026-07-28, so
// there only the handshake era runs, and the Go test compares the eras
// across targets.
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { rawCall, textOf } from '../lib.mjs';

export const capabilities = { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } };

const sampled = { role: 'assistant', content: { type: 'text', text: 'canned reply of either era' }, model: 'interop-canned', stopReason: 'endTurn' };
const elicited = { action: 'accept', content: { name: 'Interop Tester', check: true, email: 'interop@example.com', integer: 7 } };
const roots = { roots: [{ uri: 'file:///interop/root', name: 'interop-root' }] };

export function setup(client) {
  client.setRequestHandler(CreateMessageRequestSchema, async () => sampled);
  client.setRequestHandler(ElicitRequestSchema, async () => elicited);
  client.setRequestHandler(ListRootsRequestSchema, async () => roots);
}

const calls = [
  ['sampling', 'trigger-sampling-request', { prompt: 'either era', maxTokens: 20 }],
  ['elicitation', 'trigger-elicitation-request', {}],
  ['roots', 'get-roots-list', {}],
];

export default async function run({ client, wire, target, tool, problems, observed }) {
  observed.handshake = {};
  for (const [what, name, args] of calls) {
    observed.handshake[what] = textOf(await rawCall(client, wire, tool(name), args));
  }
  if (target.name === 'bare') return;

  const modern = new Client(
    { name: 'mcp-mux-interop-current-era-input', version: '1.0.0' },
    { capabilities, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  modern.setRequestHandler('sampling/createMessage', async () => sampled);
  modern.setRequestHandler('elicitation/create', async () => elicited);
  modern.setRequestHandler('roots/list', async () => roots);
  await modern.connect(
    new StdioClientTransport({ command: target.command, args: target.args ?? [], env: { ...process.env, ...(target.env ?? {}) }, stderr: 'inherit' }),
  );
  observed.current = {};
  try {
    observed.version = modern.getNegotiatedProtocolVersion?.();
    for (const [what, name, args] of calls) {
      try {
        const res = await modern.callTool({ name: tool(name), arguments: args });
        observed.current[what] = textOf({ result: res });
      } catch (e) {
        problems.push(`${what} (current era): ${e?.message ?? e}`);
      }
    }
  } finally {
    await modern.close();
  }
  if (observed.version !== '2026-07-28') problems.push(`negotiated ${observed.version}, want 2026-07-28`);
  for (const [what] of calls) {
    if (observed.current[what] !== observed.handshake[what]) {
      problems.push(`${what}: the current era got ${JSON.stringify(observed.current[what])}, the handshake era ${JSON.stringify(observed.handshake[what])}`);
    }
  }
}
