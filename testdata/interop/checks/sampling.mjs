// Sampling: server-everything's trigger-sampling-request tool asks the
// client for sampling/createMessage inside the tools/call; the client's
// canned answer comes back in the tool's result.
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { rawCall, textOf, toolListed } from '../lib.mjs';

export const capabilities = { sampling: {} };
const canned = 'canned reply from the interop client';
const prompt = 'interop sampling prompt';

export function setup(client, ctx) {
  ctx.observed.samplingRequests = [];
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    ctx.observed.samplingRequests.push(req.params);
    return { role: 'assistant', content: { type: 'text', text: canned }, model: 'interop-canned', stopReason: 'endTurn' };
  });
}

export default async function run({ client, wire, tool, problems, observed }) {
  if (!(await toolListed(client, wire, tool('trigger-sampling-request')))) problems.push('trigger-sampling-request is not listed');
  observed.call = await rawCall(client, wire, tool('trigger-sampling-request'), { prompt, maxTokens: 20 });
  if (observed.samplingRequests.length !== 1) {
    problems.push(`${observed.samplingRequests.length} sampling/createMessage requests reached the client, want 1`);
  } else if (!JSON.stringify(observed.samplingRequests[0].messages).includes(prompt)) {
    problems.push(`sampling request lacks the prompt: ${JSON.stringify(observed.samplingRequests[0])}`);
  }
  if (!textOf(observed.call).includes(canned)) problems.push(`tool result lacks the canned reply: ${JSON.stringify(observed.call)}`);
}
