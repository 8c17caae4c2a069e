package mesh

import (
	"fmt"
	"strings"
	"testing"
)

// TestLayout: agents are placed in columns by the depth at which they
// receive handoffs, an edge's figures are summed over its sender's Batons
// and coloured by health, a peer named only by an edge is drawn as not
// announced, and a cycle does not hang the layout.
func TestLayout(t *testing.T) {
	t.Parallel()
	batons := []Announcement{
		{ID: "1", Agent: "planner", Edges: []EdgeFigures{{To: "researcher", Rate: "2.0", P99: "12ms", Breaker: "closed"}}},
		{ID: "2", Agent: "researcher", Edges: []EdgeFigures{
			{To: "writer", Rate: "1.5", Errors: 0.2, P99: "40ms", Breaker: "closed"},
			{To: "search", Rate: "0.0", P99: "-", Breaker: "open"}}},
		{ID: "3", Agent: "researcher", Edges: []EdgeFigures{{To: "writer", Rate: "0.5", P99: "90ms", Breaker: "half-open"}}},
		{ID: "4", Agent: "writer", Edges: []EdgeFigures{{To: "planner", Rate: "0.1", P99: "5ms", Breaker: "closed"}}},
	}
	g := Layout(batons)
	depth := map[string]int{}
	for _, n := range g.Nodes {
		depth[n.Agent] = n.Depth
		if n.Agent == "search" && n.Announced {
			t.Error("search has no Baton announced but is drawn as announced")
		}
		if n.Agent == "researcher" && len(n.Batons) != 2 {
			t.Errorf("researcher has %d Batons, want 2", len(n.Batons))
		}
	}
	// planner → researcher → writer → planner is a cycle with no way in:
	// planner, first by name, starts it.
	if len(depth) != 4 || depth["researcher"] != depth["planner"]+1 || depth["writer"] != depth["researcher"]+1 ||
		depth["search"] != depth["researcher"]+1 {
		t.Errorf("depths %v", depth)
	}
	classes := map[string]string{}
	for _, e := range g.Edges {
		classes[e.From+"→"+e.To] = e.Class
		if e.From == "researcher" && e.To == "writer" &&
			(e.Rate != 2.0 || e.ErrorShare != 0.2 || e.P99 != "40ms" || e.Breaker != "half-open" ||
				e.Label != "2.0/s · 20.0% err" || e.Label2 != "p99 40ms · breaker half-open") {
			t.Errorf("researcher→writer summed as %+v", e)
		}
		if !strings.HasPrefix(e.Path, "M") {
			t.Errorf("edge %s→%s has no path: %q", e.From, e.To, e.Path)
		}
	}
	want := map[string]string{"planner→researcher": "ok", "researcher→writer": "bad", "researcher→search": "down", "writer→planner": "ok"}
	for k, v := range want {
		if classes[k] != v {
			t.Errorf("%s is %q, want %q", k, classes[k], v)
		}
	}
	if g.Width <= 0 || g.Height <= 0 {
		t.Errorf("size %dx%d", g.Width, g.Height)
	}
}

// TestLayoutCaps: a mesh past the caps draws at most MaxNodes nodes and
// says how many it left out.
func TestLayoutCaps(t *testing.T) {
	t.Parallel()
	var batons []Announcement
	for i := range MaxNodes + 50 {
		batons = append(batons, Announcement{ID: string(rune('a' + i%26)), Agent: "agent-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('0'+i/26))})
	}
	g := Layout(batons)
	if len(g.Nodes) != MaxNodes || g.Dropped != 50 {
		t.Errorf("%d nodes, %d dropped; want %d and 50", len(g.Nodes), g.Dropped, MaxNodes)
	}
}

// TestLayoutExternals: each external destination an agent fetches from is
// a node of its own, named by its route or host:port and shared by the
// agents that fetch from it, with its edges' figures summed over their
// Batons; past MaxExternal per agent, the quietest are drawn as one edge
// to "other external", with what the Baton itself counted there.
func TestLayoutExternals(t *testing.T) {
	t.Parallel()
	ext := func(name, rate string) EdgeFigures {
		return EdgeFigures{To: ExternalPrefix + name, Rate: rate, P99: "100ms", Breaker: "-"}
	}
	var many []EdgeFigures
	for i := range MaxExternal + 3 {
		many = append(many, ext(fmt.Sprintf("h%02d.example.com:443", i), fmt.Sprintf("%d.0", 20-i)))
	}
	many = append(many, ext("openai", "0.5"), EdgeFigures{To: OtherExternal, Rate: "0.25"})
	batons := []Announcement{
		{ID: "1", Agent: "planner", Edges: []EdgeFigures{ext("openai", "2.0"), ext("api.search.dev:443", "1.0"),
			{To: "writer", Rate: "1.0", Breaker: "closed"}}},
		{ID: "2", Agent: "planner", Edges: []EdgeFigures{ext("openai", "1.0")}},
		{ID: "3", Agent: "writer", Edges: many},
	}
	g := Layout(batons)
	nodes := map[string]Node{}
	for _, n := range g.Nodes {
		nodes[n.Agent] = n
	}
	externals := 0
	for _, n := range g.Nodes {
		if n.External {
			externals++
			if n.Sub != "external" || n.Link != "" {
				t.Errorf("external node %s: sub %q, link %q", n.Agent, n.Sub, n.Link)
			}
		}
	}
	// openai, api.search.dev:443, writer's eight busiest and other external.
	if externals != 2+MaxExternal+1 {
		t.Errorf("%d external nodes, want %d", externals, 2+MaxExternal+1)
	}
	if n := nodes[ExternalPrefix+"openai"]; !n.External || n.Label != "openai" || n.Depth != 1 {
		t.Errorf("openai is drawn as %+v", n)
	}
	if n := nodes[OtherExternal]; !n.External || n.Label != "other external" {
		t.Errorf("other external is drawn as %+v", n)
	}
	if n := nodes["writer"]; n.External || !n.Announced {
		t.Errorf("writer is drawn as %+v", n)
	}
	edges := map[string]Edge{}
	for _, e := range g.Edges {
		edges[e.From+"→"+e.To] = e
	}
	if e := edges["planner→_external:openai"]; e.Rate != 3 || e.Label != "3.0/s · 0.0% err" {
		t.Errorf("planner→openai summed over its Batons as %+v", e)
	}
	if _, ok := edges["writer→_external:openai"]; ok {
		t.Error("writer's quietest destination is drawn on its own")
	}
	// Merged: h08..h10 (12 + 11 + 10), openai (0.5) and what the Baton
	// counted together (0.25).
	if e := edges["writer→_external"]; e.Rate != 33.75 {
		t.Errorf("writer→other external: %.2f/s, want 33.75", e.Rate)
	}
	if _, ok := edges["writer→_external:h07.example.com:443"]; !ok {
		t.Error("writer's eighth busiest destination is not drawn on its own")
	}
}
