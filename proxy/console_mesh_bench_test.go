package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
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
	// The Baton's own announcement (agent a, the 26th node) is written as
	// it starts, beside the benchmark's first request.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ms, err := store.IndexRange(ctx, "mesh/batons", math.Inf(-1), math.Inf(1), 0, 0); err == nil && len(ms) == 51 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the Baton's own announcement is not in the store")
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

// BenchmarkConsoleTrace measures a trace page's server time with 500
// records (a chain fanning out: each receipt hands off twice): reading the
// trace from the store, verifying its hash chain, the tree, the waterfall
// and the agents' graph, and rendering.
func BenchmarkConsoleTrace(b *testing.B) {
	store := state.NewMemory(config.Memory{MaxEntries: 1 << 16, MaxBytes: 256 << 20})
	bt := startBaton(b, "agent: a\nupstream: http://127.0.0.1:1\nadmin_token: "+consoleToken+"\nlog_level: warn\n", store)
	book := record.NewBook(store, time.Hour, slog.New(slog.DiscardHandler))
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	start := time.Now()
	var recs []*record.Record
	for i := range 500 {
		r := &record.Record{ID: fmt.Sprintf("%s.%016x", trace, i+1), TraceID: trace, Side: record.Egress,
			From: fmt.Sprintf("agent-%02d", i/20), To: fmt.Sprintf("agent-%02d", i/20+1), Method: "POST", Target: "/work",
			State: record.Delivered, Status: 200, Attempts: 1, Latency: 12, Created: start.Add(time.Duration(i) * time.Millisecond)}
		if i > 0 {
			r.ParentID = fmt.Sprintf("%s.%016x", trace, (i-1)/2+1)
		}
		if i%50 == 7 {
			r.State, r.Attempts = record.Dead, 3
		}
		recs = append(recs, r)
	}
	if err := book.Write(context.Background(), recs...); err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://"+bt.AdminAddr()+"/console/traces/"+trace, nil)
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	get := func() {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := strings.Count(string(body), `<g class="bar `); resp.StatusCode != 200 || n != 500 {
			b.Fatalf("%d, %d bars", resp.StatusCode, n)
		}
	}
	get()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		get()
	}
}

// BenchmarkConsoleTraceModelCalls measures a trace page's server time with
// 100 receipts of 20 agents, each handling with four model calls: 500
// bars (the receipts and their calls), the spend per agent and for the
// chain, and the tree.
func BenchmarkConsoleTraceModelCalls(b *testing.B) {
	store := state.NewMemory(config.Memory{MaxEntries: 1 << 16, MaxBytes: 256 << 20})
	bt := startBaton(b, "agent: a\nupstream: http://127.0.0.1:1\nadmin_token: "+consoleToken+"\nlog_level: warn\n", store)
	book := record.NewBook(store, time.Hour, slog.New(slog.DiscardHandler))
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	start := time.Now()
	var recs []*record.Record
	for i := range 100 {
		at := start.Add(time.Duration(10*i) * time.Millisecond)
		s := &record.ModelSummary{}
		for j := range 4 {
			c := record.ModelCall{At: at.Add(time.Duration(2*j) * time.Millisecond), Ms: 1.5, TTFTMs: 0.4, API: "llm", Provider: "openai",
				Operation: "chat", Model: "gpt-4.1-mini-2025-04-14", Status: 200, Finish: "stop"}
			switch j {
			case 0:
				c.Journal = true
			default:
				c.InputTokens, c.OutputTokens, c.UsageKnown, c.CostUSD, c.Priced = 250, 50, true, 0.00018, true
			}
			s.Add(c)
		}
		r := &record.Record{ID: fmt.Sprintf("%s.%016x", trace, i+1), TraceID: trace, Side: record.Ingress,
			From: fmt.Sprintf("agent-%02d", i/5), To: fmt.Sprintf("agent-%02d", i/5+1), Method: "POST", Target: "/work",
			State: record.Delivered, Status: 200, Attempts: 1, Latency: 9, Created: at, Models: s}
		recs = append(recs, r)
	}
	if err := book.Write(context.Background(), recs...); err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://"+bt.AdminAddr()+"/console/traces/"+trace, nil)
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	get := func() {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n, m := strings.Count(string(body), `<g class="bar `), strings.Count(string(body), `<tr class="spend"`); resp.StatusCode != 200 || n != 500 || m != 20 {
			b.Fatalf("%d, %d bars, %d agents' spend", resp.StatusCode, n, m)
		}
	}
	get()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		get()
	}
}
