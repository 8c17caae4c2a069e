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
// created and as long as it took, with marks for what happened to it; and
// one per model call under the receipt of the handling it served
// (console_models.go), among that receipt's handoffs by when it began.
type waterfall struct {
	Width, Height int
	Rows          []waterfallRow
	Span          string // the trace's length, from its first record to its last end
	Dropped       int    // records past maxBars, not drawn
	DroppedCalls  int    // model calls past maxBars, not drawn
	Calls         int    // model calls drawn
}

type waterfallRow struct {
	ID, Label, State string
	Class            string // the bar's colour: the state, or failed, or resolved (fates.class); for a call, callClass
	// Call numbers a model call among its receipt's (from 1; ID is then
	// the receipt's); 0 for a record.
	Call       int
	Depth      int
	Y, LabelX  int
	X, W       int // the bar
	BarY, BarH int
	MarkX      int // where its marks start
	Marks      []string
	Title      string
}

// Geometry of the waterfall.
const (
	maxBars   = 500
	barsLeft  = 300 // the labels' column
	barsWidth = 620
	rowHeight = 22
	barHeight = 15
	// A model call's bar is thinner than a handoff's, and centred on its row.
	callHeight = 9
)

// waterfallItem is one bar to draw: a record, or a model call of the
// receipt r.
type waterfallItem struct {
	r     *record.Record
	call  *record.ModelCall
	n     int // the call's number among r's
	depth int
}

func (it waterfallItem) start() time.Time {
	if it.call != nil {
		return it.call.At
	}
	return it.r.Created
}

func (it waterfallItem) end() time.Time {
	if it.call != nil {
		return it.call.At.Add(time.Duration(it.call.Ms * float64(time.Millisecond)))
	}
	return it.r.Created.Add(latency(*it.r))
}

// newWaterfall draws the trace whose tree is roots.
func newWaterfall(roots []*records.TraceNode) waterfall {
	var items []waterfallItem
	nrec := 0
	var walk func(n *records.TraceNode, depth int)
	walk = func(n *records.TraceNode, depth int) {
		r := &n.Record
		items = append(items, waterfallItem{r: r, depth: depth})
		nrec++
		var calls []record.ModelCall
		if r.Side == record.Ingress && r.Models != nil {
			calls = r.Models.List
		}
		next := 0
		callsBefore := func(t time.Time, all bool) {
			for ; next < len(calls) && (all || !calls[next].At.After(t)); next++ {
				items = append(items, waterfallItem{r: r, call: &calls[next], n: next + 1, depth: depth + 1})
			}
		}
		for _, c := range n.Children {
			callsBefore(c.Record.Created, false)
			walk(c, depth+1)
		}
		callsBefore(time.Time{}, true)
	}
	for _, n := range roots {
		walk(n, 0)
	}
	all := make([]record.Record, 0, nrec)
	for _, it := range items {
		if it.call == nil {
			all = append(all, *it.r)
		}
	}
	f := newFates(all)
	var w waterfall
	if len(items) > maxBars {
		for _, it := range items[maxBars:] {
			if it.call != nil {
				w.DroppedCalls++
			} else {
				w.Dropped++
			}
		}
		items = items[:maxBars]
	}
	if len(items) == 0 {
		return w
	}
	start, end := items[0].start(), time.Time{}
	for _, it := range items {
		if s := it.start(); s.Before(start) {
			start = s
		}
		if e := it.end(); e.After(end) {
			end = e
		}
	}
	span := max(end.Sub(start), time.Millisecond)
	w.Span = span.Round(time.Millisecond).String()
	w.Width, w.Height = barsLeft+barsWidth+260, (len(items)+1)*rowHeight+8
	for i, it := range items {
		var row waterfallRow
		if it.call != nil {
			row = callRow(it.r, it.call, it.n)
			w.Calls++
		} else {
			r := it.r
			row = waterfallRow{ID: r.ID, Label: string(r.Side) + " " + r.From + "→" + r.To + " " + r.Method + " " + r.Target,
				State: string(r.State), Class: f.class(r), Marks: marks(r, f), BarH: barHeight}
			row.Title = row.Label + ": " + string(r.State) + ", " + strconv.FormatFloat(r.Latency, 'f', 1, 64) + " ms"
		}
		row.Depth, row.Y, row.LabelX = it.depth, (i+1)*rowHeight, 6+12*min(it.depth, 12)
		row.BarY = row.Y + (barHeight-row.BarH)/2
		row.X = barsLeft + int(float64(barsWidth)*float64(it.start().Sub(start))/float64(span))
		row.W = max(2, int(float64(barsWidth)*float64(it.end().Sub(it.start()))/float64(span)))
		row.MarkX = row.X + row.W + 6
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
