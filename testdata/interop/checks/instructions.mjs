// initialize: the server's instructions.
export default async function run({ client, problems, observed }) {
  observed.instructions = client.getInstructions() ?? '';
  if (!observed.instructions) problems.push('initialize result has no instructions');
}
