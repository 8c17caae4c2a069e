package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkMCPHop is one request through two Batons, a → b, on the memory
// store, as a plain JSON handoff and as an MCP tool call on an MCP edge of
// the same size: what MCP awareness adds to a handoff, in CPU per request.
func BenchmarkMCPHop(b *testing.B) {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	}))
	b.Cleanup(agent.Close)
	pad := strings.Repeat("x", 400)
	for _, c := range []struct{ name, edge, body string }{
		{"plain", "", `{"task":"search","query":"` + pad + `"}`},
		{"mcp", ", mcp: {}", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_web","arguments":{"query":"` + pad + `"}}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			bB := startBaton(b, "agent: b\nupstream: "+agent.URL+"\nlog_level: warn\nedges: [{from: a"+c.edge+"}]\n", benchMemory())
			aB := startBaton(b, "agent: a\nupstream: http://127.0.0.1:1\nlog_level: warn\npeers: {b: {url: http://"+bB.IngressAddr()+"}}\nedges: [{to: b"+c.edge+"}]\n", benchMemory())
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				req, _ := http.NewRequest("POST", "http://"+aB.EgressAddr()+"/mcp", strings.NewReader(c.body))
				req.Host = "b"
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
