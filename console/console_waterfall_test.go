package console

import (
	"slices"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// TestWaterfall: each record is a bar placed by its start and length, in
// the tree's order with its depth, and marked with what happened to it: a
// stop, a retry, a dead letter and its resolution, journal hits, a gate
// held and decided, a compensation.
func TestWaterfall(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	recs := []record.Record{
		{ID: "t.1", Side: record.Egress, From: "a", To: "b", State: record.Delivered, Created: at(0), Latency: 100, StoppedAt: "t.3"},
		{ID: "t.2", ParentID: "t.1", Side: record.Ingress, From: "a", To: "b", State: record.Delivered, Created: at(5), Latency: 90,
			Journal: &record.JournalSummary{Hits: 2}},
		{ID: "t.3", ParentID: "t.2", Side: record.Egress, From: "b", To: "c", State: record.Dead, Created: at(10), Latency: 40,
			Attempts: 3, ResolvedBy: "t.4"},
		{ID: "t.4", ParentID: "t.2", Side: record.Egress, From: "b", To: "c", State: record.Delivered, Created: at(60), Latency: 20,
			Approval: &record.Approval{Gate: "refunds", Decision: "approved"}},
		{ID: "t.5", ParentID: "t.2", Side: record.Egress, From: "b", To: "d", State: record.Dead, Created: at(80), Latency: 400,
			Approval: &record.Approval{Gate: "big"}, Compensates: "t.0/booking"},
	}
	w := newWaterfall(records.TraceTree(recs))
	if len(w.Rows) != 5 || w.Span != "480ms" {
		t.Fatalf("%d rows over %s, want 5 over 480ms", len(w.Rows), w.Span)
	}
	want := map[string][]string{
		"t.1": {"chain stopped below"},
		"t.2": {"journal: 2 hit(s)"},
		"t.3": {"dead letter, resolved", "retried ×2"},
		"t.4": {"gate refunds: approved"},
		"t.5": {"stopped here", "held by gate big", "compensation"},
	}
	depth := map[string]int{"t.1": 0, "t.2": 1, "t.3": 2, "t.4": 2, "t.5": 2}
	for i, r := range w.Rows {
		if !slices.Equal(r.Marks, want[r.ID]) {
			t.Errorf("%s marked %q, want %q", r.ID, r.Marks, want[r.ID])
		}
		if r.Depth != depth[r.ID] || r.W < 2 || r.X < barsLeft || r.X+r.W > barsLeft+barsWidth+2 {
			t.Errorf("%s: depth %d, bar at %d width %d", r.ID, r.Depth, r.X, r.W)
		}
		if i > 0 && r.X < w.Rows[0].X {
			t.Errorf("%s starts before the trace's first record", r.ID)
		}
	}
	if last := w.Rows[4]; last.X+last.W < barsLeft+barsWidth-2 || last.X+last.W > barsLeft+barsWidth {
		t.Errorf("the last record to end does not end at the right edge: %d+%d", last.X, last.W)
	}

	// The agents on the trace, and what happened on each edge.
	g := traceGraph(recs)
	got := map[string]string{}
	for _, e := range g.Edges {
		got[e.From+"→"+e.To] = e.Class + ": " + e.Label + " / " + e.Label2
	}
	wantEdges := map[string]string{
		"a→b": "ok: 1 handoff(s) / ",
		"b→c": "warn: 2 handoff(s) / 1 resolved · retried · gated",
		"b→d": "down: 1 handoff(s) / stopped here · gated",
	}
	if len(got) != len(wantEdges) || len(g.Nodes) != 4 {
		t.Errorf("graph: %d nodes, edges %v", len(g.Nodes), got)
	}
	for k, v := range wantEdges {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

// TestWaterfallCap: a trace past maxBars draws maxBars bars and says how
// many it left to the tree.
func TestWaterfallCap(t *testing.T) {
	t.Parallel()
	var recs []record.Record
	for i := range maxBars + 20 {
		recs = append(recs, record.Record{ID: "t." + string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('0'+i/260)),
			State: record.Delivered, Created: time.Unix(int64(i), 0), Latency: 1})
	}
	w := newWaterfall(records.TraceTree(recs))
	if len(w.Rows) != maxBars || w.Dropped != 20 {
		t.Errorf("%d bars, %d dropped", len(w.Rows), w.Dropped)
	}
}
