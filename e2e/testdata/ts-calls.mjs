// A TypeScript SDK client (legacy era) that calls a tool in a loop through a cluster
// while the test breaks something under it (e2e TestClusterRedisRestarted).
// Usage: node ts-calls.mjs URL
// Prints "session ID" once its session is open and a call has been answered; then
// calls t__echo one after another. On a line "mark" on stdin it starts counting the
// calls made from then on and prints "after N" after each; on "stop" it ends, and prints
// one JSON object: the calls, the failures (each with its message), the session id
// before and after.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url] = process.argv.slice(2);
const out = { calls: 0, after: 0, failures: [] };
const client = new Client({ name: "ts-calls", version: "1.0.0" }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
await client.callTool({ name: "t__echo", arguments: { n: 0 } });
out.sessionBefore = transport.sessionId;
console.log(`session ${transport.sessionId}`);

let marked = false;
let stopped = false;
const lines = createInterface({ input: process.stdin });
lines.on("line", (l) => {
  if (l === "mark") marked = true;
  if (l === "stop") stopped = true;
});
while (!stopped) {
  try {
    const r = await client.callTool({ name: "t__echo", arguments: { n: out.calls } });
    if (r.isError) out.failures.push(`tool error: ${JSON.stringify(r.content)}`);
  } catch (e) {
    out.failures.push(`${e.code ?? ""} ${e.message}`);
  }
  out.calls++;
  if (marked) {
    out.after++;
    console.log(`after ${out.after}`);
  }
}
lines.close();
out.sessionAfter = transport.sessionId;
await client.close();
console.log(JSON.stringify(out));
