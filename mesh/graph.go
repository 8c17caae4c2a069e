package mesh

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Graph is the mesh drawn on the server: agents placed in columns by the
// depth at which they receive handoffs, and the edges between them. The
// console renders it as SVG; coordinates are in SVG user units.
type Graph struct {
	Width, Height int
	Nodes         []Node
	Edges         []Edge
	// Dropped counts the nodes and edges past the caps, not drawn.
	Dropped int
}

// Node is one agent: its Batons (replicas), or none when only an edge
// names it; or an external destination its agents fetch from.
type Node struct {
	Agent     string
	Label     string // the agent's name, shortened to fit its box
	Sub       string // a line under it
	Link      string // where it leads ("": nowhere)
	X, Y      int
	W, H      int
	Batons    []Announcement
	Announced bool
	// External marks an external destination (a web site, a model API):
	// Agent is then its edges' "to" label (ExternalPrefix and its name).
	External bool
	// Model marks an external destination that serves a model API: drawn
	// taller, with its tokens a minute and error share on Sub2, and Title
	// in full (models.go).
	Model bool
	Sub2  string
	Title string
	Depth int
}

// Edge is the edge from one agent to another, with its figures summed
// over the sender's Batons.
type Edge struct {
	From, To string
	Path     string // SVG path data
	LabelX   int
	LabelY   int
	Label    string // rate and error share
	Label2   string // p99, and the breaker when it is not closed
	// Under is SVG path data drawn under each line of the labels, so that
	// no other edge's path runs through their text (the edge's own runs
	// between the lines): labels.go.
	Under      string
	Class      string // ok, warn, bad, down or idle
	Rate       float64
	ErrorShare float64
	P99        string
	Breaker    string
	// Traces are the edge's latest traces, newest first; Anchor names the
	// edge's place on its page.
	Traces []RecentTrace
	Anchor string
	// Model marks an agent's edge to a model API, with its calls' tokens
	// a minute over the agent's Batons.
	Model        bool
	TokensPerMin float64
	busiest      float64 // the rate of the replica whose p99 is shown
}

// Caps on what one page draws.
const (
	MaxNodes = 200
	MaxEdges = 1000
)

// Geometry.
const (
	nodeW, nodeH = 170, 54
	modelNodeH   = nodeH + 18 // a third line
	colGap       = 330
	rowGap       = 92
	margin       = 30
)

// Draw places nodes (by agent name) in columns by the depth at which they
// receive the edges' handoffs, and routes the edges between them; each
// edge's class and labels are the caller's. Each edge's labels go on a
// point of its own path where they meet no other label and no node
// (labels.go); columns spread for long labels. At most MaxNodes nodes and
// MaxEdges edges are drawn.
func Draw(nodes []Node, edges []Edge) Graph {
	var g Graph
	sort.Slice(nodes, func(i, j int) bool { // agents first, then external destinations, by name
		if nodes[i].External != nodes[j].External {
			return !nodes[i].External
		}
		return nodes[i].Agent < nodes[j].Agent
	})
	if len(nodes) > MaxNodes {
		g.Dropped += len(nodes) - MaxNodes
		nodes = nodes[:MaxNodes]
	}
	byAgent := make(map[string]*Node, len(nodes))
	order := make([]string, len(nodes))
	for i := range nodes {
		byAgent[nodes[i].Agent], order[i] = &nodes[i], nodes[i].Agent
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].From != edges[j].From {
			return edges[i].From < edges[j].From
		}
		return edges[i].To < edges[j].To
	})

	// Depth: the fewest handoffs from an agent nothing hands off to.
	in := map[string]int{}
	out := map[string][]string{}
	for _, e := range edges {
		if byAgent[e.From] != nil && byAgent[e.To] != nil && e.From != e.To {
			in[e.To]++
			out[e.From] = append(out[e.From], e.To)
		}
	}
	depth := map[string]int{}
	var queue []string
	walk := func() {
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			for _, b := range out[a] {
				if _, seen := depth[b]; !seen {
					depth[b] = depth[a] + 1
					queue = append(queue, b)
				}
			}
		}
	}
	for _, a := range order {
		if in[a] == 0 {
			depth[a] = 0
			queue = append(queue, a)
		}
	}
	walk()
	for _, a := range order { // a cycle with no way in starts at its first agent by name
		if _, ok := depth[a]; !ok {
			depth[a] = 0
			queue = append(queue, a)
			walk()
		}
	}
	// Columns as far apart as the widest label between two of them needs;
	// where edges fan out, room for two side by side, so that each label
	// can sit on its own edge towards its own end, where the paths part.
	gap := colGap
	for _, e := range edges {
		if byAgent[e.From] != nil && byAgent[e.To] != nil && depth[e.To] > depth[e.From] {
			room := labelWidth(&e) + 2*nodeClear
			if len(out[e.From]) > 1 || in[e.To] > 1 {
				room *= 2
			}
			gap = max(gap, min(nodeW+room, maxColGap))
		}
		if byAgent[e.From] != nil && byAgent[e.To] != nil && depth[e.To] == depth[e.From] && e.From != e.To {
			// Its labels sit on its loop out of the column (route).
			gap = max(gap, min(nodeW+labelWidth(&e)+2*nodeClear+labelPad, maxColGap))
		}
	}
	rows := map[int]int{}
	cols, maxRows := 0, 0
	for _, a := range order {
		n := byAgent[a]
		n.Depth = depth[a]
		if n.Label == "" {
			n.Label = shorten(a, 20)
		}
		n.W, n.H = nodeW, nodeH
		if n.Model {
			n.H = modelNodeH
		}
		n.X = margin + n.Depth*gap
		n.Y = margin + rows[n.Depth]*rowGap
		rows[n.Depth]++
		cols, maxRows = max(cols, n.Depth+1), max(maxRows, rows[n.Depth])
		g.Nodes = append(g.Nodes, *n)
		g.Height = max(g.Height, n.Y+n.H+margin+20)
	}
	g.Width = 2*margin + (cols-1)*gap + nodeW
	labels := newLabeller(g.Nodes)
	outs, ins := map[string]int{}, map[string]int{}
	for _, e := range edges {
		if byAgent[e.From] != nil && byAgent[e.To] != nil {
			outs[e.From]++
			ins[e.To]++
		}
	}
	for _, e := range edges {
		a, b := byAgent[e.From], byAgent[e.To]
		if a == nil || b == nil {
			continue
		}
		if len(g.Edges) == MaxEdges {
			g.Dropped++
			continue
		}
		e.Anchor = "edge-" + strconv.Itoa(len(g.Edges))
		c := route(a, b, labelWidth(&e))
		e.Path = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", int(c[0][0]), int(c[0][1]), int(c[1][0]), int(c[1][1]),
			int(c[2][0]), int(c[2][1]), int(c[3][0]), int(c[3][1]))
		g.Width, g.Height = max(g.Width, int(c[1][0])+margin), max(g.Height, int(c[1][1])+margin)
		ts := labelTs
		switch {
		case outs[e.From] > 1 && ins[e.To] == 1:
			ts = labelTsOut
		case ins[e.To] > 1 && outs[e.From] == 1:
			ts = labelTsInto
		}
		lb := labels.place(&e, c, ts)
		g.Width, g.Height = max(g.Width, lb.X1+margin), max(g.Height, lb.Y1+margin)
		g.Edges = append(g.Edges, e)
	}
	return g
}

// route is the path of an edge from a to b: from a's right side to b's
// left side when b is in a later column; out of a's right side and back
// into b's when they share a column, far enough out for labels labelW
// wide to sit on it clear of the column; from a's bottom round below to
// b's bottom when b is in an earlier column (or is a).
func route(a, b *Node, labelW int) bezier {
	if b.Depth == a.Depth && a != b {
		// The curve's middle is three quarters of the way to its control
		// points.
		x, out := float64(a.X+a.W), float64(nodeClear+labelW/2+labelPad)/0.75
		y1, y2 := float64(a.Y+a.H/2), float64(b.Y+b.H/2)
		return bezier{{x, y1}, {x + out, y1}, {x + out, y2}, {x, y2}}
	}
	if b.Depth <= a.Depth {
		x1, x2 := float64(a.X+a.W/2), float64(b.X+b.W/2)
		y1, y2 := float64(a.Y+a.H), float64(b.Y+b.H)
		dip := max(y1, y2) + rowGap/2
		return bezier{{x1, y1}, {x1, dip}, {x2, dip}, {x2, y2}}
	}
	x1, y1 := float64(a.X+a.W), float64(a.Y+a.H/2)
	x2, y2 := float64(b.X), float64(b.Y+b.H/2)
	mx := float64(int(x1+x2) / 2)
	return bezier{{x1, y1}, {mx, y1}, {mx, y2}, {x2, y2}}
}

// worse reports whether breaker state a is worse than b.
func worse(a, b string) bool {
	rank := map[string]int{"closed": 1, "half-open": 2, "open": 3}
	return rank[a] > rank[b]
}

// healthClass colours an edge: down (breaker open), bad (5% or more of its
// handoffs failed), warn (some failed, or the breaker is half-open), idle
// (none in the window), ok.
func healthClass(e Edge) string {
	switch {
	case e.Breaker == "open":
		return "down"
	case e.ErrorShare >= 0.05:
		return "bad"
	case e.ErrorShare > 0 || e.Breaker == "half-open":
		return "warn"
	case e.Rate == 0:
		return "idle"
	}
	return "ok"
}

func edgeLabels(e Edge) (string, string) {
	first := strconv.FormatFloat(e.Rate, 'f', 1, 64) + "/s · " + strconv.FormatFloat(100*e.ErrorShare, 'f', 1, 64) + "% err"
	var second []string
	if e.P99 != "" && e.P99 != "-" {
		second = append(second, "p99 "+e.P99)
	}
	if e.Breaker == "open" || e.Breaker == "half-open" {
		second = append(second, "breaker "+e.Breaker)
	}
	if e.Model {
		second = append(second, perMinute(e.TokensPerMin)+" tok/min")
	}
	return first, strings.Join(second, " · ")
}

// shorten cuts s to at most n characters, ending a cut one with "…".
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
