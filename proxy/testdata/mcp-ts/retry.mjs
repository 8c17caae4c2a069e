// The official MCP TypeScript SDK's client, run by proxy/mcp_ts_test.go,
// with a fetch that retries a request whose answer was lost (a 502 from a
// gateway), as retrying HTTP clients do: the same request again, the same
// JSON-RPC id, in the same session. It forwards no trace context. It
// prints what it saw as one JSON object.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { viaBaton } from "./via-baton.mjs";

const out = { retries: 0 };

// retrying tries a request once more when a gateway answers 502.
async function retrying(url, init = {}) {
  const res = await viaBaton(url, init);
  if (res.status !== 502) return res;
  await res.arrayBuffer();
  out.retries++;
  return viaBaton(url, init);
}

const client = new Client({ name: "ts-agent", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL("http://tools/mcp"), { fetch: retrying });
await client.connect(transport);
out.booking = (await client.callTool({ name: "book_seat", arguments: { seat: "15D" } })).content[0].text;
await client.close();
console.log(JSON.stringify(out));
