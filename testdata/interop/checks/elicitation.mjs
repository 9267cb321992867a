// Elicitation: server-everything's trigger-elicitation-request tool asks
// the client for elicitation/create (form mode) inside the tools/call; the
// client accepts with canned content, which comes back in the tool result.
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { rawCall, textOf, toolListed } from '../lib.mjs';

export const capabilities = { elicitation: { form: {} } };
const answer = { name: 'Interop Tester', check: true, email: 'interop@example.com', integer: 7 };

export function setup(client, ctx) {
  ctx.observed.elicitations = [];
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    ctx.observed.elicitations.push({ mode: req.params.mode, message: req.params.message });
    return { action: 'accept', content: answer };
  });
}

export default async function run({ client, wire, tool, problems, observed }) {
  if (!(await toolListed(client, wire, tool('trigger-elicitation-request')))) problems.push('trigger-elicitation-request is not listed');
  observed.call = await rawCall(client, wire, tool('trigger-elicitation-request'), {});
  if (observed.elicitations.length !== 1) {
    problems.push(`${observed.elicitations.length} elicitation/create requests reached the client, want 1`);
  }
  const text = textOf(observed.call);
  if (!text.includes(`- Name: ${answer.name}`) || !text.includes(`- Favorite Integer: ${answer.integer}`)) {
    problems.push(`tool result lacks the accepted content: ${JSON.stringify(observed.call)}`);
  }
}
