package console

import (
	"strconv"
	"strings"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/mesh"
	"github.com/batonproxy/baton/records"
)

// waterfall is a trace drawn as bars: one per record, in the tree's order
// (a record under the one that caused it, indented), placed by when it was
// created and as long as it took, with marks for what happened to it.
type waterfall struct {
	Width, Height int
	Rows          []waterfallRow
	Span          string // the trace's length, from its first record to its last end
	Dropped       int    // records past maxBars, not drawn
}

type waterfallRow struct {
	ID, Label, State string
	Depth            int
	Y, LabelX        int
	X, W             int // the bar
	MarkX            int // where its marks start
	Marks            []string
	Title            string
}

// Geometry of the waterfall.
const (
	maxBars   = 500
	barsLeft  = 300 // the labels' column
	barsWidth = 620
	rowHeight = 22
)

// newWaterfall draws the trace whose tree is roots.
func newWaterfall(roots []*records.TraceNode) waterfall {
	type item struct {
		r     record.Record
		depth int
	}
	var items []item
	var walk func(n *records.TraceNode, depth int)
	walk = func(n *records.TraceNode, depth int) {
		items = append(items, item{n.Record, depth})
		for _, c := range n.Children {
			walk(c, depth+1)
		}
	}
	for _, n := range roots {
		walk(n, 0)
	}
	var w waterfall
	if len(items) > maxBars {
		w.Dropped, items = len(items)-maxBars, items[:maxBars]
	}
	if len(items) == 0 {
		return w
	}
	start, end := items[0].r.Created, time.Time{}
	for _, it := range items {
		if it.r.Created.Before(start) {
			start = it.r.Created
		}
	}
	for _, it := range items {
		if e := it.r.Created.Add(latency(it.r)); e.After(end) {
			end = e
		}
	}
	span := max(end.Sub(start), time.Millisecond)
	w.Span = span.Round(time.Millisecond).String()
	w.Width, w.Height = barsLeft+barsWidth+260, (len(items)+1)*rowHeight+8
	for i, it := range items {
		r := it.r
		row := waterfallRow{ID: r.ID, Label: string(r.Side) + " " + r.From + "→" + r.To + " " + r.Method + " " + r.Target,
			State: string(r.State), Depth: it.depth, Y: (i + 1) * rowHeight, LabelX: 6 + 12*min(it.depth, 12)}
		row.X = barsLeft + int(float64(barsWidth)*float64(r.Created.Sub(start))/float64(span))
		row.W = max(2, int(float64(barsWidth)*float64(latency(r))/float64(span)))
		row.Marks, row.MarkX = marks(r), row.X+row.W+6
		row.Title = row.Label + ": " + string(r.State) + ", " + strconv.FormatFloat(r.Latency, 'f', 1, 64) + " ms"
		if len(row.Label) > 44 {
			row.Label = row.Label[:43] + "…"
		}
		w.Rows = append(w.Rows, row)
	}
	return w
}

func latency(r record.Record) time.Duration {
	return time.Duration(r.Latency * float64(time.Millisecond))
}

// marks says what happened to a record, in the words the bars show.
func marks(r record.Record) []string {
	var m []string
	switch {
	case r.State == record.Dead && r.ResolvedBy != "":
		m = append(m, "dead letter, resolved")
	case r.State == record.Dead:
		m = append(m, "stopped here")
	}
	if r.StoppedAt != "" {
		m = append(m, "chain stopped below")
	}
	if r.Attempts > 1 {
		m = append(m, "retried ×"+strconv.Itoa(r.Attempts-1))
	}
	if j := r.Journal; j != nil && j.Hits > 0 {
		m = append(m, "journal: "+strconv.Itoa(j.Hits)+" hit(s)")
	}
	if a := r.Approval; a != nil {
		switch a.Decision {
		case "":
			m = append(m, "held by gate "+a.Gate)
		default:
			m = append(m, "gate "+a.Gate+": "+a.Decision)
		}
	}
	if r.Compensates != "" {
		m = append(m, "compensation")
	}
	if len(r.Effects) > 0 {
		m = append(m, strconv.Itoa(len(r.Effects))+" side effect(s)")
	}
	return m
}

// traceGraph draws the agents on a trace and the handoffs between them
// (its egress records), each edge marked with what happened on it: a dead
// letter standing (down), one resolved, retries, a gate.
func traceGraph(recs []record.Record) mesh.Graph {
	type edge struct {
		n, dead, resolved, retried, held int
	}
	agents := map[string]int{} // records received
	edges := map[[2]string]*edge{}
	for _, r := range recs {
		if r.From == "" || r.To == "" {
			continue
		}
		if _, ok := agents[r.From]; !ok {
			agents[r.From] = 0
		}
		if r.Side == record.Ingress {
			agents[r.To]++
			continue
		}
		if _, ok := agents[r.To]; !ok {
			agents[r.To] = 0
		}
		e := edges[[2]string{r.From, r.To}]
		if e == nil {
			e = &edge{}
			edges[[2]string{r.From, r.To}] = e
		}
		e.n++
		switch {
		case r.State == record.Dead && r.ResolvedBy == "":
			e.dead++
		case r.State == record.Dead:
			e.resolved++
		}
		if r.Attempts > 1 {
			e.retried++
		}
		if r.Approval != nil {
			e.held++
		}
	}
	nodes := make([]mesh.Node, 0, len(agents))
	for a, n := range agents {
		nodes = append(nodes, mesh.Node{Agent: a, Announced: true, Sub: strconv.Itoa(n) + " received"})
	}
	es := make([]mesh.Edge, 0, len(edges))
	for k, e := range edges {
		me := mesh.Edge{From: k[0], To: k[1], Class: "ok", Label: strconv.Itoa(e.n) + " handoff(s)"}
		var marks []string
		if e.dead > 0 {
			me.Class = "down"
			marks = append(marks, "stopped here")
		}
		if e.resolved > 0 {
			marks = append(marks, strconv.Itoa(e.resolved)+" resolved")
		}
		if e.retried > 0 {
			marks = append(marks, "retried")
		}
		if e.held > 0 {
			marks = append(marks, "gated")
		}
		if me.Class == "ok" && len(marks) > 0 {
			me.Class = "warn"
		}
		me.Label2 = strings.Join(marks, " · ")
		es = append(es, me)
	}
	return mesh.Draw(nodes, es)
}
