// Counts cl100k_base tokens (the encoding of GPT-4 and GPT-3.5; gpt-tokenizer,
// pinned in package.json) of each file named on the command line, and prints
// {"file": count, ...}. Driven by tokens/main.go.
import { readFileSync } from 'node:fs';
import { countTokens } from 'gpt-tokenizer/encoding/cl100k_base';

const out = {};
for (const file of process.argv.slice(2)) {
  out[file] = countTokens(readFileSync(file, 'utf8'));
}
console.log(JSON.stringify(out));
