// A TypeScript SDK client (legacy era, 2025-11-25) driving mcp-proxy over stdio.
// Usage: node ts-client.mjs PROXY_BIN CONFIG     (stdio: spawns the proxy)
//        node ts-client.mjs --http URL             (Streamable HTTP: a running proxy)
// Prints one JSON object with what it observed; exits non-zero on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [proxy, config] = process.argv.slice(2);
const out = { progress: [], logs: [], sampled: 0, elicited: 0 };

const client = new Client(
  { name: "ts-e2e", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
);
client.setRequestHandler(CreateMessageRequestSchema, async () => {
  out.sampled++;
  return { model: "ts-model", role: "assistant", content: { type: "text", text: "sampled by the TS client" } };
});
client.setRequestHandler(ElicitRequestSchema, async () => {
  out.elicited++;
  return { action: "accept", content: { username: "ts", email: "ts@example.com", name: "TS", age: 7 } };
});
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: "file:///ts/root", name: "ts" }] }));
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => out.logs.push(n.params.logger ?? ""));

const transport =
  proxy === "--http"
    ? new StreamableHTTPClientTransport(new URL(config))
    : new StdioClientTransport({ command: proxy, args: ["run", "--config", config, "--log-level", "warn"], stderr: "inherit" });
await client.connect(transport);
out.server = client.getServerVersion();
out.protocolVersion = transport._protocolVersion ?? null;

const tools = await client.listTools();
out.tools = tools.tools.map((t) => t.name);
const echo = await client.callTool({ name: "npm__echo", arguments: { message: "from TS" } });
out.echo = echo.content[0].text;
const progressCall = await client.callTool(
  { name: "ev__test_tool_with_progress", arguments: {} },
  undefined,
  { onprogress: (p) => out.progress.push(p.progress) },
);
out.progressDone = !progressCall.isError;
const sampling = await client.callTool({ name: "ev__test_sampling", arguments: { prompt: "hi" } });
out.sampling = sampling.content.map((c) => c.text ?? "").join(" ");
const elicitation = await client.callTool({ name: "ev__test_elicitation", arguments: { message: "who?" } });
out.elicitation = elicitation.content.map((c) => c.text ?? "").join(" ");
const res = await client.readResource({ uri: "test://static-text" });
out.resource = res.contents[0].uri;
const prompt = await client.getPrompt({ name: "ev__test_simple_prompt", arguments: {} });
out.promptMessages = prompt.messages.length;
try {
  await client.callTool({ name: "no__such_tool", arguments: {} });
  out.unknownTool = "no error";
} catch (e) {
  out.unknownTool = e.code;
}
await client.close();
console.log(JSON.stringify(out));
