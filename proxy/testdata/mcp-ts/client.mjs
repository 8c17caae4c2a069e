// The official MCP TypeScript SDK's client, run by proxy/mcp_ts_test.go. It
// reaches the MCP server "tools" through its agent's Baton: each request goes
// to BATON_EGRESS with Host: tools, as a proxied agent's requests do. It
// prints what it saw as one JSON object.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { viaBaton } from "./via-baton.mjs";

const out = { progress: 0 };
const client = new Client({ name: "ts-agent", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL("http://tools/mcp"), { fetch: viaBaton });
await client.connect(transport);
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
out.search = (await client.callTool({ name: "search_web", arguments: { query: "ts" } })).content[0].text;
out.booking = (
  await client.callTool({ name: "book_seat", arguments: { seat: "9F" } }, undefined, { onprogress: () => { out.progress++; } })
).content[0].text;
try {
  await client.callTool({ name: "delete_all", arguments: {} });
  out.denied = "not refused";
} catch (e) {
  out.denied = { code: e.code, message: e.message };
}
await client.close();
console.log(JSON.stringify(out));
