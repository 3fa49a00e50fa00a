// A TypeScript SDK client (legacy era) of an endpoint in search mode: it lists, searches,
// waits for the list_changed the search causes, lists again, calls the activated tool
// by its name, and calls another through call_tool (as a client that does not refresh).
// Usage: node ts-search.mjs PROXY_BIN CONFIG ENDPOINT   (stdio: spawns `run --endpoint`)
//        node ts-search.mjs --http URL KEY              (Streamable HTTP, with an API key)
// Prints one JSON object with what it observed; exits non-zero on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [a1, a2, a3] = process.argv.slice(2);
const out = { listChanged: 0 };
const client = new Client({ name: "ts-search", version: "1.0.0" }, { capabilities: {} });
let changed;
const changedOnce = new Promise((resolve) => (changed = resolve));
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  out.listChanged++;
  changed();
});
const transport =
  a1 === "--http"
    ? new StreamableHTTPClientTransport(new URL(a2), { requestInit: { headers: { Authorization: `Bearer ${a3}` } } })
    : new StdioClientTransport({ command: a1, args: ["run", "--config", a2, "--endpoint", a3, "--log-level", "warn"], stderr: "inherit" });
await client.connect(transport);
out.instructions = client.getInstructions() ?? "";
out.capabilities = client.getServerCapabilities();
out.initial = (await client.listTools()).tools.map((t) => t.name);

const found = await client.callTool({ name: "search_tools", arguments: { query: "create entities in the knowledge graph", limit: 2 } });
out.found = found.structuredContent.tools.map((t) => t.name);
out.foundSchema = !!found.structuredContent.tools[0]?.inputSchema;
out.foundText = found.content[0].text.includes("create_entities");

await Promise.race([changedOnce, new Promise((_, reject) => setTimeout(() => reject(new Error("no list_changed")), 10000))]);
out.after = (await client.listTools()).tools.map((t) => t.name);

const created = await client.callTool({
  name: "mem__create_entities",
  arguments: { entities: [{ name: "Grace", entityType: "person", observations: ["wrote a compiler"] }] },
});
out.created = !created.isError;
const searched = await client.callTool({ name: "call_tool", arguments: { name: "mem__search_nodes", arguments: { query: "Grace" } } });
out.searched = searched.content.map((c) => c.text ?? "").join("");
try {
  await client.callTool({ name: "call_tool", arguments: { name: "no_such_tool", arguments: {} } });
  out.unknown = "no error";
} catch (e) {
  out.unknown = e.code;
}
await client.close();
console.log(JSON.stringify(out));
