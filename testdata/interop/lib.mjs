// Shared by the checks: starting a target (mcp-mux or a bare server) under
// the official TypeScript SDK client, and a tap on the wire so that checks
// can assert on the raw JSON-RPC messages (the SDK's typed results can drop
// fields, and its progress callback can miss a late notification).

import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

// Wire records every JSON-RPC message in both directions, in order.
export class Wire {
  // t0: where `at` counts from (the sessions of one check share one).
  constructor(t0 = Date.now()) {
    this.messages = []; // { dir: 'in' | 'out' | 'http', at: ms since t0, msg }
    this.t0 = t0;
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

// watchGET is a fetch that records on wire (dir 'http') the answer to
// each GET: the client's stream for what the server sends outside any
// request (resources/updated, list_changed). A server sends such a message
// only on that stream, and drops it while the stream is not open yet.
function watchGET(wire, noGET) {
  return async (url, init) => {
    // noGET: a client that opens no GET stream (the spec makes it a MAY),
    // as the SDK's does when the server answers 405.
    if (noGET && (init?.method ?? 'GET') === 'GET') return new Response(null, { status: 405 });
    const r = await fetch(url, init);
    if ((init?.method ?? 'GET') === 'GET') wire.record('http', { GET: r.status });
    return r;
  };
}

// serverStream resolves once the client's GET stream was answered 200
// (true), or false after ms.
export async function serverStream(wire, ms = 5000) {
  const m = await wire.waitFor((m) => m.dir === 'http' && m.msg.GET === 200, ms);
  return m !== undefined;
}

// tapHTTP does what tap does for the Streamable HTTP transport, which has
// no read buffer: the SDK's connect() calls an onmessage set before it
// first, then handles the message itself.
function tapHTTP(transport, wire) {
  transport.onmessage = (msg) => wire.record('in', msg);
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    wire.record('out', msg);
    return send(msg, opts);
  };
}

// connect starts target's process (or, when target.url is set, reaches it
// over Streamable HTTP) and initializes a session with the given client
// name (clientInfo) and capabilities; setup registers request handlers first, onTransport learns
// the transport before the (possibly hanging) initialize. Server stderr
// goes to ours, so the Go test can show it when a check fails.
export async function connect(target, { name, capabilities = {}, setup = () => {}, wire = new Wire(), onTransport = () => {} } = {}) {
  let transport;
  if (target.url) {
    transport = new StreamableHTTPClientTransport(new URL(target.url), { fetch: watchGET(wire, target.noGET) });
    tapHTTP(transport, wire);
  } else {
    transport = new StdioClientTransport({
      command: target.command,
      args: target.args ?? [],
      // A full environment: by default the SDK passes only HOME LOGNAME PATH
      // SHELL TERM USER to the server.
      env: { ...process.env, ...(target.env ?? {}) },
      stderr: 'inherit',
    });
    tap(transport, wire);
  }
  onTransport(transport);
  const client = new Client({ name: name ?? 'mcp-mux-interop', version: '1.0.0' }, { capabilities });
  // Handlers must exist before initialize: a server may ask at once.
  setup(client);
  await client.connect(transport);
  return { client, transport, wire, pid: transport.pid };
}

// disconnect ends a session the way a leaving client does: over HTTP it
// first DELETEs the session (what tells the server it is over), then
// closes; over stdio close ends stdin, then signals.
export async function disconnect({ client, transport }) {
  if (transport?.sessionId !== undefined && transport.terminateSession) {
    await transport.terminateSession().catch(() => {});
  }
  await (client ?? transport)?.close();
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

// until polls cond (which may be async) every 25 ms until it returns a
// truthy value, which it resolves with, or resolves undefined after ms.
// For what can only be asked, not awaited (another process's state).
export async function until(cond, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v || Date.now() > deadline) return v || undefined;
    await sleep(25);
  }
}

// readJSON reads a resource whose one content is JSON text (mcp-mux's
// own, such as mcp-mux://backends) and parses it.
export async function readJSON(client, uri) {
  const r = await client.readResource({ uri });
  return JSON.parse(r.contents[0].text);
}

// spied is what spy.mjs wrote down in file: [{at, method, id, uri}], the
// messages mcp-mux sent the backend behind it.
export function spied(file) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if (e.code === 'ENOENT') return [];
    throw e;
  }
  const lines = text.split('\n');
  lines.pop(); // '' after the last newline, or a line still being written
  return lines.filter(Boolean).map((l) => JSON.parse(l));
}

// backendPIDs are the pids of mcp-mux's backends, from mcp-mux://backends:
// the Go test checks they are gone once mcp-mux is.
export async function backendPIDs(client) {
  return (await readJSON(client, 'mcp-mux://backends')).backends.map((b) => b.pid).filter(Boolean);
}

// toolListed resolves true once tools/list has name, re-listing on each
// notifications/tools/list_changed, or false after ms. A server may offer
// a tool only once it knows the client's capabilities (server-everything's
// sampling and elicitation tools), and mcp-mux serving HTTP restarts a
// backend that started before its first client came, to tell it them.
export async function toolListed(client, wire, name, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const mark = wire.messages.length;
    const tools = await allPages(client, wire, 'tools/list', 'tools');
    if (tools.some((t) => t.name === name)) return true;
    const left = deadline - Date.now();
    if (left <= 0) return false;
    await wire.waitFor((m) => m.dir === 'in' && m.msg.method === 'notifications/tools/list_changed', left, mark);
  }
}
