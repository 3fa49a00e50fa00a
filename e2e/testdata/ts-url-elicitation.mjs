// A TypeScript SDK client (legacy era, 2025-11-25) that declares URL-mode elicitation
// and calls a tool of an upstream the principal has not authorized yet (e2e
// TestCredentialsOAuth). Usage: node ts-url-elicitation.mjs URL TOKEN TOOL
// It prints one line {"elicitation": {...}} with what the -32042 error
// (UrlElicitationRequiredError) carried, waits for notifications/elicitation/complete
// with that elicitationId (the test follows the link in a browser meanwhile; at most
// 60 s) and prints one line {"complete": "<elicitationId>"}, then calls again, as the
// spec lets a client do on that notification, and prints one line {"result": "..."}
// with the tool's text; exits non-zero on anything else.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitationCompleteNotificationSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

const [url, token, tool] = process.argv.slice(2);
const client = new Client({ name: "ts-url-elicitation", version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } });
const completed = [];
let onComplete = () => {};
client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
  completed.push(n.params.elicitationId);
  onComplete();
});
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
  const id = el?.elicitationId;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no notifications/elicitation/complete for ${id} (got ${JSON.stringify(completed)})`)), 60000);
    onComplete = () => {
      if (completed.includes(id)) {
        clearTimeout(timer);
        resolve();
      }
    };
    onComplete();
  }).catch((err) => {
    console.error(String(err));
    process.exit(1);
  });
  console.log(JSON.stringify({ complete: id }));
}

const r = await client.callTool({ name: tool, arguments: {} });
console.log(JSON.stringify({ result: r.content?.[0]?.text ?? "", isError: r.isError ?? false }));
await client.close();
