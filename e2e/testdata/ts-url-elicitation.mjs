// A TypeScript SDK client (legacy era, 2025-11-25) that declares URL-mode elicitation
// and calls a tool of an upstream the principal has not authorized yet (e2e
// TestCredentialsOAuth). Usage: node ts-url-elicitation.mjs URL TOKEN TOOL
// It prints one line {"elicitation": {...}} with what the -32042 error
// (UrlElicitationRequiredError) carried, waits for a line "go" on stdin (the test has
// followed the link in a browser meanwhile), calls again and prints one line
// {"result": "..."} with the tool's text; exits non-zero on anything else.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

const [url, token, tool] = process.argv.slice(2);
const client = new Client({ name: "ts-url-elicitation", version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);

try {
  const r = await client.callTool({ name: tool, arguments: {} });
  console.error(`expected URL elicitation, got a result: ${JSON.stringify(r)}`);
  process.exit(1);
} catch (e) {
  if (!(e instanceof McpError) || e.code !== ErrorCode.UrlElicitationRequired) {
    console.error(`expected -32042, got: ${e}`);
    process.exit(1);
  }
  const el = e.data?.elicitations?.[0];
  console.log(JSON.stringify({ elicitation: el, errorClass: e.constructor.name }));
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() === "go") break;
}
lines.close();

const r = await client.callTool({ name: tool, arguments: {} });
console.log(JSON.stringify({ result: r.content?.[0]?.text ?? "", isError: r.isError ?? false }));
await client.close();
