// A TypeScript SDK client (legacy era) whose session outlives the proxy replica that
// holds it (e2e TestClusterTypeScriptAdopted).
// Usage: node ts-adopt.mjs URL
// Prints "session ID" once its session is open and a call has been answered, then
// waits for a line on stdin (the test kills the session's replica meanwhile), goes on
// with the same session, and prints one JSON object with what it observed.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url] = process.argv.slice(2);
const out = { sampled: 0 };
const client = new Client({ name: "ts-adopt", version: "1.0.0" }, { capabilities: { sampling: {} } });
client.setRequestHandler(CreateMessageRequestSchema, async () => {
  out.sampled++;
  return { model: "ts-model", role: "assistant", content: { type: "text", text: "sampled by the TS client" } };
});
let changed = 0;
const changeWaiters = [];
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  changed++;
  changeWaiters.splice(0).forEach((w) => w());
});
// triggerChange has a call (landing on whichever replica) change the tools, and waits
// up to 20 s for the list_changed on the GET stream; it returns whether one came.
async function triggerChange() {
  const seen = changed;
  const came = new Promise((resolve) => {
    changeWaiters.push(() => resolve(true));
    setTimeout(() => resolve(false), 20000);
  });
  await client.callTool({ name: "ev__test_trigger_tool_change", arguments: {} });
  return changed > seen || (await came);
}
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
out.changedBefore = await triggerChange();
const before = await client.callTool({ name: "t__echo", arguments: { when: "before" } });
out.before = before.content[0].text;
out.sessionBefore = transport.sessionId;
// A call in flight on the session's replica when it is killed.
let progressed;
const firstProgress = new Promise((resolve) => (progressed = resolve));
const inflight = client
  .callTool({ name: "t__slow", arguments: { ms: 20000 } }, undefined, { onprogress: () => progressed(), timeout: 60000 })
  .then(() => "answered", (e) => `${e.code ?? ""} ${e.message}`)
  .finally(() => (out.inflightMs = Date.now() - killedAt));
let killedAt;
await firstProgress;
killedAt = Date.now();
console.log(`session ${transport.sessionId}`);

const lines = createInterface({ input: process.stdin });
await new Promise((resolve) => lines.once("line", resolve));
lines.close();

out.inflight = await inflight;
const t0 = Date.now();
const after = await client.callTool({ name: "t__echo", arguments: { when: "after" } });
out.after = after.content[0].text;
out.afterMs = Date.now() - t0;
out.tools = (await client.listTools()).tools.length;
const sampling = await client.callTool({ name: "ev__test_sampling", arguments: { prompt: "hi" } });
out.sampling = sampling.content.map((c) => c.text ?? "").join(" ");
out.sessionAfter = transport.sessionId;
out.changedAfter = await triggerChange(); // reported, not required: see the test
await transport.terminateSession(); // DELETE, through whichever replica
out.sessionAfterDelete = transport.sessionId ?? "";
await client.close();
console.log(JSON.stringify(out));
