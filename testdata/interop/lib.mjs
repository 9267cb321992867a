// Shared by the checks: starting a target (mcp-mux or a bare server) under
// the official TypeScript SDK client, and a tap on the wire so that checks
// can assert on the raw JSON-RPC messages (the SDK's typed results can drop
// fields, and its progress callback can miss a late notification).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

// Wire records every JSON-RPC message in both directions, in order.
export class Wire {
  constructor() {
    this.messages = []; // { dir: 'in' | 'out', at: ms since start, msg }
    this.t0 = Date.now();
    this.waiters = new Set();
  }

  record(dir, msg) {
    this.messages.push({ dir, at: Date.now() - this.t0, msg });
    for (const w of this.waiters) w();
  }

  incoming() {
    return this.messages.filter((m) => m.dir === 'in').map((m) => m.msg);
  }

  outgoing() {
    return this.messages.filter((m) => m.dir === 'out').map((m) => m.msg);
  }

  notifications(method) {
    return this.incoming().filter((m) => m.method === method && m.id === undefined);
  }

  requests(method) {
    return this.incoming().filter((m) => m.method === method && m.id !== undefined);
  }

  // The raw result (or error) of the last request with method this client
  // sent: { result } or { error }, or undefined if none arrived.
  lastResponse(method) {
    const out = this.outgoing().filter((m) => m.method === method && m.id !== undefined);
    if (out.length === 0) return undefined;
    const id = out[out.length - 1].id;
    return this.responseTo(id);
  }

  responseTo(id) {
    const r = this.incoming().find((m) => m.id === id && m.method === undefined);
    if (!r) return undefined;
    return 'error' in r ? { error: r.error } : { result: r.result };
  }

  // Resolves with the first message from index `from` on that pred
  // accepts, or undefined after ms.
  waitFor(pred, ms, from = 0) {
    const hit = () => this.messages.slice(from).find((m) => pred(m));
    const found = hit();
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => {
      const done = (v) => {
        clearTimeout(timer);
        this.waiters.delete(w);
        resolve(v);
      };
      const w = () => {
        const f = hit();
        if (f) done(f);
      };
      const timer = setTimeout(() => done(undefined), ms);
      this.waiters.add(w);
    });
  }
}

// tap makes transport report every message to wire. Incoming messages are
// taken where the stdio transport decodes them (its read buffer; the SDK
// version is pinned), since the SDK wraps transport.onmessage itself in
// connect() and a wrapper there would miss or loop.
function tap(transport, wire) {
  const rb = transport._readBuffer;
  const read = rb.readMessage.bind(rb);
  rb.readMessage = () => {
    const msg = read();
    if (msg !== null) wire.record('in', msg);
    return msg;
  };
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    wire.record('out', msg);
    return send(msg, opts);
  };
}

// connect starts target's process and initializes a session with the given
// client capabilities; setup registers request handlers first, onTransport
// learns the transport before the (possibly hanging) initialize. Server
// stderr goes to ours, so the Go test can show it when a check fails.
export async function connect(target, { capabilities = {}, setup = () => {}, wire = new Wire(), onTransport = () => {} } = {}) {
  const transport = new StdioClientTransport({
    command: target.command,
    args: target.args ?? [],
    // A full environment: by default the SDK passes only HOME LOGNAME PATH
    // SHELL TERM USER to the server.
    env: { ...process.env, ...(target.env ?? {}) },
    stderr: 'inherit',
  });
  tap(transport, wire);
  onTransport(transport);
  const client = new Client({ name: 'mcp-mux-interop', version: '1.0.0' }, { capabilities });
  // Handlers must exist before initialize: a server may ask at once.
  setup(client);
  await client.connect(transport);
  return { client, transport, wire, pid: transport.pid };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const lists = {
  'tools/list': (c, p) => c.listTools(p),
  'prompts/list': (c, p) => c.listPrompts(p),
  'resources/list': (c, p) => c.listResources(p),
  'resources/templates/list': (c, p) => c.listResourceTemplates(p),
};

// allPages calls list (a method such as 'tools/list') until there is no
// nextCursor and returns the raw items under key, from the wire.
export async function allPages(client, wire, method, key) {
  const items = [];
  let cursor;
  for (let page = 0; page < 100; page++) {
    // The SDK's typed result may drop fields; the raw one comes from the
    // wire. A rejection (the SDK finding the result invalid) still leaves
    // the raw response there.
    await lists[method](client, cursor ? { cursor } : {}).catch(() => {});
    const raw = wire.lastResponse(method);
    if (!raw || raw.error) throw new Error(`${method}: ${JSON.stringify(raw)}`);
    items.push(...(raw.result[key] ?? []));
    cursor = raw.result.nextCursor;
    if (!cursor) return items;
  }
  throw new Error(`${method}: more than 100 pages`);
}

// rawCall calls a tool and returns its raw JSON-RPC response ({result} or
// {error}) from the wire.
export async function rawCall(client, wire, name, args, options) {
  let thrown;
  await client.callTool({ name, arguments: args }, undefined, options).catch((e) => {
    thrown = e;
  });
  const out = wire.outgoing().filter((m) => m.method === 'tools/call' && m.params?.name === name);
  const raw = out.length ? wire.responseTo(out[out.length - 1].id) : undefined;
  return raw ?? { thrown: String(thrown?.message ?? thrown) };
}

export function textOf(raw) {
  return (raw?.result?.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}
