package mesh

import (
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
