package mesh

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// drawnBox is the room an edge's labels take as the console draws them
// (layout.html): 11px text centred on LabelX, the first line's baseline at
// LabelY, the second's 22 below it; at most 7px a character.
func drawnBox(e Edge) box {
	w := max(utf8.RuneCountInString(e.Label), utf8.RuneCountInString(e.Label2))*7 + 8
	bottom := e.LabelY + 4
	if e.Label2 != "" {
		bottom += 22
	}
	return box{X0: e.LabelX - w/2, Y0: e.LabelY - 11, X1: e.LabelX - w/2 + w, Y1: bottom}
}

// TestLabelsDoNotOverlap: however edges fan out, cross or turn back, no
// two edges' labels share any room, nor a label and a node, and the graph
// is large enough to hold them; a label goes on its own edge where there is
// room there.
func TestLabelsDoNotOverlap(t *testing.T) {
	t.Parallel()
	edge := func(from, to string) Edge {
		return Edge{From: from, To: to, Label: "12.3/s · 100.0% err", Label2: "p99 1.25s · breaker half-open"}
	}
	fan := func(from string, n int) []Edge {
		var es []Edge
		for i := range n {
			es = append(es, edge(from, fmt.Sprintf("%s-t%d", from, i)))
		}
		return es
	}
	tests := []struct {
		name   string
		edges  []Edge
		onPath bool // every label on its own edge, between its nodes
	}{
		{name: "fan-out of 4", edges: fan("hub", 4), onPath: true},
		{name: "fan-out of 9", edges: fan("hub", 9), onPath: true},
		{name: "fan-out of 6 with short labels", edges: func() []Edge {
			es := fan("hub", 6)
			for i := range es {
				es[i].Label, es[i].Label2 = "1.0/s · 0.0% err", ""
			}
			return es
		}(), onPath: true},
		// a → d and b → c cross at one middle, as do a → c and b → d; the
		// hub's fan-out spans two columns, over the first one's nodes.
		{name: "crossing and skipping", edges: append(append(fan("hub", 5),
			edge("a", "d"), edge("b", "c"), edge("a", "c"), edge("b", "d")),
			edge("hub-t0", "deep"), edge("hub", "deep"), edge("a", "deep"))},
		// Every target hands back to the hub: the way back runs below,
		// under the nodes of the rows beneath.
		{name: "fan-out with the way back", edges: func() []Edge {
			es := fan("hub", 5)
			for i := range 5 {
				es = append(es, edge(fmt.Sprintf("hub-t%d", i), "hub"))
			}
			return es
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			names := map[string]bool{}
			for _, e := range tc.edges {
				names[e.From], names[e.To] = true, true
			}
			var nodes []Node
			for n := range names {
				nodes = append(nodes, Node{Agent: n, Announced: true})
			}
			g := Draw(nodes, tc.edges)
			if len(g.Edges) != len(tc.edges) {
				t.Fatalf("%d edges drawn, want %d", len(g.Edges), len(tc.edges))
			}
			byName := map[string]Node{}
			for _, n := range g.Nodes {
				byName[n.Agent] = n
			}
			boxes := make([]box, len(g.Edges))
			for i, e := range g.Edges {
				boxes[i] = drawnBox(e)
				b := boxes[i]
				if b.X0 < 0 || b.Y0 < 0 || b.X1 > g.Width || b.Y1 > g.Height {
					t.Errorf("%s→%s's label %+v is outside the graph (%dx%d)", e.From, e.To, b, g.Width, g.Height)
				}
				for j := range i {
					if b.overlaps(boxes[j]) {
						t.Errorf("the labels of %s→%s %+v and %s→%s %+v overlap", e.From, e.To, b,
							g.Edges[j].From, g.Edges[j].To, boxes[j])
					}
				}
				for _, n := range g.Nodes {
					if b.overlaps(box{X0: n.X, Y0: n.Y, X1: n.X + n.W, Y1: n.Y + n.H}) {
						t.Errorf("the label of %s→%s %+v covers node %s", e.From, e.To, b, n.Agent)
					}
				}
				from, to := byName[e.From], byName[e.To]
				if tc.onPath && (e.LabelX <= from.X+from.W || e.LabelX >= to.X || !strings.HasPrefix(e.Path, "M")) {
					t.Errorf("%s→%s's label at x %d is not between its nodes (%d to %d)", e.From, e.To, e.LabelX, from.X+from.W, to.X)
				}
			}
		})
	}
}
