// viaBaton is a fetch that sends to the Baton's egress (BATON_EGRESS),
// naming the peer in Host, as a proxied agent's requests do. The clients
// run by proxy/mcp_ts_test.go use it as their transport's fetch.
import http from "node:http";
import { Readable } from "node:stream";

const [egressHost, egressPort] = process.env.BATON_EGRESS.split(":");

export function viaBaton(url, init = {}) {
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
