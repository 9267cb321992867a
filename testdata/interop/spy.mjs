// A stdio relay between mcp-mux and a backend that also writes down what
// mcp-mux asks the backend, so that a check can see what reached it
// (resources/subscribe and resources/unsubscribe, which a client of mcp-mux
// cannot see):
//
//   node spy.mjs LOGFILE COMMAND [ARGS...]
//
// Bytes pass through unchanged both ways. Each message mcp-mux sends that
// has a method is appended to LOGFILE as one JSON line {at, method, id,
// uri} before it is passed on, so it is in the file before the backend can
// answer it. The relay ends with the backend, with its exit status; the
// end of its stdin is passed on, and so are SIGTERM and SIGINT.
import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';

const [logFile, command, ...args] = process.argv.slice(2);
if (!logFile || !command) {
  console.error('usage: node spy.mjs LOGFILE COMMAND [ARGS...]');
  process.exit(64);
}
const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
child.on('error', (e) => {
  console.error(`spy: ${command}: ${e.message}`);
  process.exit(127);
});
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => child.kill(sig));

let pending = '';
const utf8 = new StringDecoder('utf8'); // a chunk may end inside a character
function note(chunk) {
  pending += utf8.write(chunk);
  let nl;
  while ((nl = pending.indexOf('\n')) >= 0) {
    const line = pending.slice(0, nl).trim();
    pending = pending.slice(nl + 1);
    if (!line) continue;
    try {
      const msg = JSON.parse(line);
      if (msg.method) {
        appendFileSync(logFile, JSON.stringify({ at: Date.now(), method: msg.method, id: msg.id, uri: msg.params?.uri }) + '\n');
      }
    } catch {
      // not JSON: passed on all the same; the backend answers it
    }
  }
}

process.stdin.on('data', (chunk) => {
  note(chunk);
  child.stdin.write(chunk);
});
process.stdin.on('end', () => child.stdin.end());
child.stdin.on('error', () => {}); // the backend gone: its exit ends us
child.stdout.pipe(process.stdout);
