// The official MCP TypeScript SDK's client, run by proxy/mcp_ts_test.go,
// with a fetch that retries a request whose answer was lost (a 502 from a
// gateway), as retrying HTTP clients do: the same request again, the same
// JSON-RPC id, in the same session. It forwards no trace context. It
// prints what it saw as one JSON object.
import http from "node:http";
import { Readable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [egressHost, egressPort] = process.env.BATON_EGRESS.split(":");
const out = { retries: 0 };

// viaBaton sends to the Baton's egress, naming the peer in Host.
function viaBaton(url, init = {}) {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const headers = Object.fromEntries(new Headers(init.headers ?? {}).entries());
    headers.host = u.host;
    const req = http.request(
      { host: egressHost, port: egressPort, method: init.method ?? "GET", path: u.pathname + u.search, headers },
      (res) => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) h.set(k, Array.isArray(v) ? v.join(", ") : v);
        const body = res.statusCode === 202 || res.statusCode === 204 ? null : Readable.toWeb(res);
        resolve(new Response(body, { status: res.statusCode, headers: h }));
      },
    );
    req.on("error", reject);
    init.signal?.addEventListener("abort", () => req.destroy(new Error("aborted")));
    if (init.body) req.write(init.body);
    req.end();
  });
}

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
