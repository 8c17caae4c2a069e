package mesh

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/edgehealth"
)

// TestLayoutModels: a model API is one node, the same as the agents'
// external edges to it (by route name or host:port), drawn as a model API
// with its tokens a minute and the share of its calls that failed, summed
// over every Baton that calls it, each over its own window; an agent's
// edge to it says that agent's tokens a minute, and one from an agent in
// its own column loops out of the column; an agent whose Baton
// counted its fetches there with others' still has an edge to it; and
// past MaxExternal, a model API keeps its own edge.
func TestLayoutModels(t *testing.T) {
	t.Parallel()
	ext := func(name, rate string) EdgeFigures {
		return EdgeFigures{To: ExternalPrefix + name, Rate: rate, P99: "800ms", Breaker: "closed"}
	}
	var many []EdgeFigures
	for i := range MaxExternal + 2 {
		many = append(many, ext(fmt.Sprintf("h%02d.example.com:443", i), "20.0"))
	}
	batons := []Announcement{
		{ID: "1", Agent: "planner", Window: 60, Edges: []EdgeFigures{ext("llm", "0.2"), ext("api.search.dev:443", "1.0"),
			{To: "writer", Rate: "1.0", Breaker: "closed"}},
			Models: []ModelFigures{{API: "llm", Calls: 12, Tokens: 6000, CostUSD: 0.006}}},
		{ID: "2", Agent: "planner", Window: 30, Edges: []EdgeFigures{ext("llm", "0.2")},
			Models: []ModelFigures{{API: "llm", Calls: 6, Failed: 3, Tokens: 3000, CostUSD: 0.003}}},
		// Its fetches to llm were counted with other destinations'.
		{ID: "3", Agent: "writer", Window: 60, Edges: []EdgeFigures{{To: OtherExternal, Rate: "0.1"}},
			Models: []ModelFigures{{API: "llm", Calls: 3, Tokens: 600}}},
		{ID: "4", Agent: "crawler", Window: 60, Edges: append(many, ext("api.anthropic.com:443", "0.1")),
			Models: []ModelFigures{{API: "api.anthropic.com:443", Calls: 6, Tokens: 1200}}},
	}
	g := Layout(batons)
	nodes := map[string]Node{}
	for _, n := range g.Nodes {
		nodes[n.Agent] = n
		if n.Y+n.H > g.Height {
			t.Errorf("%s ends below the graph", n.Agent)
		}
	}
	llm := nodes[ExternalPrefix+"llm"]
	// 6000 + 3000×2 + 600 tokens a minute; 3 of 21 calls failed.
	if !llm.External || !llm.Model || llm.Label != "llm" || llm.Sub != "model API" || llm.Sub2 != "13k tok/min · 14.3% err" ||
		llm.H != modelNodeH || !strings.Contains(llm.Title, "12600 tokens/min, 27.0 calls/min, 14.3% failed, $0.0120/min") {
		t.Errorf("llm is drawn as %+v", llm)
	}
	if n := nodes[ExternalPrefix+"api.search.dev:443"]; !n.External || n.Model || n.Sub2 != "" || n.H != nodeH || n.Depth != 1 {
		t.Errorf("a plain external destination is drawn as %+v", n)
	}
	if n := nodes[ExternalPrefix+"api.anthropic.com:443"]; !n.Model || n.Sub2 != "1.2k tok/min · 0.0% err" {
		t.Errorf("a model API by host is drawn as %+v", n)
	}
	edges := map[string]Edge{}
	for _, e := range g.Edges {
		edges[e.From+"→"+e.To] = e
	}
	if e := edges["planner→_external:llm"]; !e.Model || e.TokensPerMin != 12000 || e.Label2 != "p99 800ms · 12k tok/min" {
		t.Errorf("planner→llm is %+v", e)
	}
	if e := edges["writer→_external:llm"]; !e.Model || e.Rate != 0.05 || e.Label2 != "600 tok/min" || e.Class != "ok" {
		t.Errorf("writer→llm, from its model calls alone, is %+v", e)
	}
	// The writer and llm share a column: the edge leaves the writer's right
	// side and comes back into llm's, its labels clear of the column.
	w, e := nodes["writer"], edges["writer→_external:llm"]
	if w.Depth != llm.Depth || !strings.HasPrefix(e.Path, fmt.Sprintf("M%d,%d C", w.X+w.W, w.Y+w.H/2)) ||
		!strings.HasSuffix(e.Path, fmt.Sprintf(" %d,%d", llm.X+llm.W, llm.Y+llm.H/2)) || e.LabelX-labelWidth(&e)/2 < w.X+w.W+nodeClear {
		t.Errorf("writer (column %d) → llm (column %d): path %s, labels at %d", w.Depth, llm.Depth, e.Path, e.LabelX)
	}
	if e := edges["planner→_external:api.search.dev:443"]; e.Model || strings.Contains(e.Label2, "tok/min") {
		t.Errorf("planner→search is %+v", e)
	}
	if _, ok := edges["crawler→_external:api.anthropic.com:443"]; !ok {
		t.Error("crawler's quietest destination, a model API, is not drawn on its own")
	}
	if e := edges["crawler→_external"]; e.Rate != 60 {
		t.Errorf("crawler→other external: %.1f/s, want the three destinations past the cap, the model API kept apart", e.Rate)
	}
}

// TestModelFigures: a Baton announces its model APIs over the window, the
// busiest MaxModelAPIs by tokens then calls.
func TestModelFigures(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	prev := &edgehealth.Snapshot{At: t0, Models: map[edgehealth.Model]*edgehealth.ModelCounts{
		{API: "llm", Name: "m1"}: {Calls: 10, Tokens: 5000},
	}}
	cur := &edgehealth.Snapshot{At: t0.Add(time.Minute), Models: map[edgehealth.Model]*edgehealth.ModelCounts{
		{API: "llm", Name: "m1"}: {Calls: 14, Failed: 1, Tokens: 5400, CostUSD: 0.5},
		{API: "llm", Name: "m2"}: {Calls: 1, Tokens: 100},
	}}
	for i := range MaxModelAPIs + 2 {
		cur.Models[edgehealth.Model{API: fmt.Sprintf("h%02d:443", i), Name: "m"}] = &edgehealth.ModelCounts{Calls: float64(i), Tokens: 10}
	}
	got := modelFigures(prev, cur)
	if len(got) != MaxModelAPIs || got[0] != (ModelFigures{API: "llm", Calls: 5, Failed: 1, Tokens: 500, CostUSD: 0.5}) ||
		got[1].API != "h09:443" || got[MaxModelAPIs-1].API != "h03:443" {
		t.Errorf("model figures %+v", got)
	}
}
