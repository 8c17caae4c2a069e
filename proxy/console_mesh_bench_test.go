package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/mesh"
	"github.com/batonproxy/baton/state"
)

// BenchmarkConsoleMesh measures the mesh page's server time with 50
// Batons announced (25 agents, two replicas each, each handing off to the
// next two): listing them from the store, laying the graph out and
// rendering it, as an operator's browser asks for it.
func BenchmarkConsoleMesh(b *testing.B) {
	store := state.NewMemory(config.Memory{MaxEntries: 1 << 16, MaxBytes: 64 << 20})
	bt := startBaton(b, "agent: a\nupstream: http://127.0.0.1:1\nadmin_token: "+consoleToken+"\nlog_level: warn\n", store)
	ctx := context.Background()
	now := time.Now()
	for i := range 50 {
		agent := fmt.Sprintf("agent-%02d", i/2)
		an := mesh.Announcement{ID: fmt.Sprintf("id-%02d", i), Agent: agent, Version: "dev", Admin: "127.0.0.1:1",
			Started: now, LastSeen: now}
		for _, next := range []int{i/2 + 1, i/2 + 2} {
			if next < 25 {
				an.Edges = append(an.Edges, mesh.EdgeFigures{To: fmt.Sprintf("agent-%02d", next), Rate: "3.5",
					ErrPct: "1.0%", Errors: 0.01, P99: "12ms", Breaker: "closed"})
			}
		}
		v, _ := json.Marshal(an)
		if err := store.Set(ctx, "mesh/baton/"+an.ID, v, mesh.Expiry); err != nil {
			b.Fatal(err)
		}
		if err := store.IndexAdd(ctx, "mesh/batons", an.ID, float64(now.Unix()), 0); err != nil {
			b.Fatal(err)
		}
	}
	req, _ := http.NewRequest("GET", "http://"+bt.AdminAddr()+"/console/mesh", nil)
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	get := func() {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Count(string(body), `<g class="node`) != 26 {
			b.Fatalf("%d, %d nodes", resp.StatusCode, strings.Count(string(body), `<g class="node`))
		}
	}
	get()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		get()
	}
}
