// An MCP server in one file, for the Windows test of npm's .cmd shims
// (backends/batch_windows_test.go): its one tool, "args", returns the
// arguments node gave the script, as a JSON array.
const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
rl.on("line", (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.id === undefined) return; // a notification
  const result = (r) => send({ jsonrpc: "2.0", id: m.id, result: r });
  switch (m.method) {
    case "initialize":
      return result({
        protocolVersion: m.params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: "args", version: "1" },
      });
    case "tools/list":
      return result({ tools: [{ name: "args", inputSchema: { type: "object" } }] });
    case "tools/call":
      return result({ content: [{ type: "text", text: JSON.stringify(process.argv.slice(2)) }] });
    case "ping":
      return result({});
    default:
      return send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "method not found" } });
  }
});
