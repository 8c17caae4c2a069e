package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkBroadcast compares one handoff with a broadcast to 10 members,
// in CPU per op (the whole process: the sending Baton, the receiving
// Batons and their agents, the client), with records and dedupe windows on,
// on the memory store. A broadcast to 10 should cost at most 10 handoffs'
// CPU (docs/broadcast.md): the ratio of the two cpu-µs/op.
func BenchmarkBroadcast(b *testing.B) {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	b.Cleanup(agent.Close)
	const n = 10
	peers := map[string]string{}
	members := make([]string, n)
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		members[i] = name
		peers[name] = startBaton(b, "agent: "+name+"\nupstream: "+agent.URL+"\nlog_level: warn\n", benchMemory()).IngressAddr()
	}
	a := startBaton(b, "agent: a\nupstream: http://127.0.0.1:1\nlog_level: warn\n"+peerYAML(peers)+
		"groups: {panel: {members: ["+strings.Join(members, ", ")+"]}}\n", benchMemory())
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for _, host := range []string{"m0", "panel"} {
		b.Run(map[string]string{"m0": "handoff", "panel": "broadcast-10"}[host], func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			start := cpuTime()
			for b.Loop() {
				i++
				req, _ := http.NewRequest("POST", "http://"+a.EgressAddr()+"/review", strings.NewReader(fmt.Sprintf(`{"doc":%d}`, i)))
				req.Host = host
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
