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
	Class            string // the bar's colour: the state, or failed, or resolved (fates.class)
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
	all := make([]record.Record, len(items))
	for i, it := range items {
		all[i] = it.r
	}
	f := newFates(all)
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
			State: string(r.State), Class: f.class(&r), Depth: it.depth, Y: (i + 1) * rowHeight, LabelX: 6 + 12*min(it.depth, 12)}
		row.X = barsLeft + int(float64(barsWidth)*float64(r.Created.Sub(start))/float64(span))
		row.W = max(2, int(float64(barsWidth)*float64(latency(r))/float64(span)))
		row.Marks, row.MarkX = marks(&r, f), row.X+row.W+6
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

// marks says what happened to a record, in the words the bars show: where
// its chain stopped and whether that was resolved (fates), then retries,
// the journal, a gate, a compensation, side effects.
func marks(r *record.Record, f fates) []string {
	var m []string
	if s := f.of[r.ID].mark(); s != "" {
		m = append(m, s)
	}
	switch f.stoppedBelow(r) {
	case fateStopped:
		m = append(m, "chain stopped below")
	case fateResolved:
		m = append(m, "chain stopped below, resolved")
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

// traceGraph draws the agents on a trace and the handoffs between them:
// its delegation records, and the receipts with none above them in the
// trace (from a sender that runs no Baton). Each edge is marked with what
// happened on it: a stop standing (red, dashed: stopped here), a chain
// stopped below it or a dead letter superseded by a newer one (red), a
// stop resolved since (amber: dead letter, resolved), retries, a gate; each agent with the handoffs it received and
// how many of them it failed.
func traceGraph(recs []record.Record) mesh.Graph {
	f := newFates(recs)
	type edge struct {
		n, stopped, resolved, superseded, resumed, below, belowResolved, retried, held int
	}
	type agent struct{ received, failed int }
	agents := map[string]*agent{}
	see := func(name string) *agent {
		a := agents[name]
		if a == nil {
			a = &agent{}
			agents[name] = a
		}
		return a
	}
	edges := map[[2]string]*edge{}
	for i := range recs {
		r := &recs[i]
		if r.From == "" || r.To == "" {
			continue
		}
		see(r.From)
		to := see(r.To)
		if r.Side == record.Ingress {
			to.received++
			if r.State == record.Failed {
				to.failed++
			}
			if f.byID[r.ParentID] != nil {
				continue // its handoff is drawn by its delegation record
			}
		}
		e := edges[[2]string{r.From, r.To}]
		if e == nil {
			e = &edge{}
			edges[[2]string{r.From, r.To}] = e
		}
		e.n++
		switch f.of[r.ID] {
		case fateStopped:
			e.stopped++
		case fateResolved:
			e.resolved++
		case fateSuperseded:
			e.superseded++
		case fateResumed:
			e.resumed++
		}
		switch f.stoppedBelow(r) {
		case fateStopped:
			e.below++
		case fateResolved:
			e.belowResolved++
		}
		if r.Attempts > 1 {
			e.retried++
		}
		if r.Approval != nil {
			e.held++
		}
	}
	nodes := make([]mesh.Node, 0, len(agents))
	for name, a := range agents {
		sub := strconv.Itoa(a.received) + " received"
		if a.failed > 0 {
			sub += ", " + strconv.Itoa(a.failed) + " failed"
		}
		nodes = append(nodes, mesh.Node{Agent: name, Announced: true, Sub: sub})
	}
	es := make([]mesh.Edge, 0, len(edges))
	for k, e := range edges {
		me := mesh.Edge{From: k[0], To: k[1], Class: "ok", Label: strconv.Itoa(e.n) + " handoff(s)"}
		var marks []string
		switch {
		case e.stopped > 0:
			me.Class = "down"
		case e.below > 0 || e.superseded > 0:
			me.Class = "bad"
		}
		if e.stopped > 0 {
			marks = append(marks, "stopped here")
		}
		if e.below > 0 {
			marks = append(marks, "chain stopped below")
		}
		switch {
		case e.resolved == 1:
			marks = append(marks, "dead letter, resolved")
		case e.resolved > 1:
			marks = append(marks, strconv.Itoa(e.resolved)+" dead letters, resolved")
		}
		if e.superseded > 0 {
			marks = append(marks, "dead letter, superseded")
		}
		if e.resumed > 0 {
			marks = append(marks, "resumed")
		}
		if e.belowResolved > 0 {
			marks = append(marks, "stopped below, resolved") // short: it fits between two columns
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
