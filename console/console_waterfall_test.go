package console

import (
	"maps"
	"slices"
	"strings"
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
		{ID: "t.3", ParentID: "t.2", Side: record.Egress, From: "b", To: "c", State: record.Delivered, Created: at(10), Latency: 40,
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
		"t.1": {"chain stopped below, resolved"},
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
		"a→b": "warn: 1 handoff(s) / stopped below, resolved",
		"b→c": "warn: 2 handoff(s) / dead letter, resolved · retried · gated",
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

// TestWaterfallStops: a handoff whose agent failed (an A2A failed task in
// a 200) is drawn red and marked where the chain stopped, on its
// delegation record (the dead letter) and its receipt; the handoff above
// it, whose answer named the stop, is red too, marked chain stopped below.
// Once the chain resumed and the dead letter is resolved, all three are
// amber and say so; a dead letter failed again is superseded, and a
// receipt from a sender that runs no Baton is a stop of its own, resumed
// when the same key is delivered later in the trace.
func TestWaterfallStops(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	chain := func(dl record.Record) []record.Record {
		return []record.Record{
			{ID: "t.1", Side: record.Ingress, From: "client", To: "a", Key: "k", State: record.Failed, Status: 200, Created: at(0), Latency: 100},
			{ID: "t.2", ParentID: "t.1", Side: record.Egress, From: "a", To: "b", State: record.Delivered, Status: 200, StoppedAt: "t.4", Created: at(5), Latency: 90},
			{ID: "t.3", ParentID: "t.2", Side: record.Ingress, From: "a", To: "b", State: record.Failed, Status: 200, StoppedAt: "t.4", Created: at(8), Latency: 80},
			dl,
			{ID: "t.5", ParentID: "t.4", Side: record.Ingress, From: "b", To: "d", State: record.Failed, Status: 200, Created: at(12), Latency: 30},
		}
	}
	standing := record.Record{ID: "t.4", ParentID: "t.3", Side: record.Egress, From: "b", To: "d", State: record.Dead, Status: 200, Created: at(10), Latency: 40}
	resolved := standing
	resolved.State, resolved.ResolvedBy = record.Delivered, "u.9"
	superseded := standing
	superseded.ResolvedBy = "u.8"
	resumedEntry := record.Record{ID: "t.6", Side: record.Ingress, From: "client", To: "a", Key: "k", State: record.Delivered, Status: 200, Created: at(200), Latency: 10}

	tests := []struct {
		name  string
		recs  []record.Record
		bars  map[string]string // id → class: marks
		edges map[string]string
		nodes map[string]string
	}{
		{name: "standing", recs: chain(standing),
			bars: map[string]string{
				"t.1": "failed: stopped here", "t.2": "failed: chain stopped below", "t.3": "failed: chain stopped below",
				"t.4": "dead: stopped here", "t.5": "failed: stopped here"},
			edges: map[string]string{
				"client→a": "down: 1 handoff(s) / stopped here", "a→b": "bad: 1 handoff(s) / chain stopped below",
				"b→d": "down: 1 handoff(s) / stopped here"},
			nodes: map[string]string{"client": "0 received", "a": "1 received, 1 failed", "b": "1 received, 1 failed", "d": "1 received, 1 failed"}},
		{name: "resolved", recs: append(chain(resolved), resumedEntry),
			bars: map[string]string{
				"t.1": "resolved: resumed", "t.2": "resolved: chain stopped below, resolved", "t.3": "resolved: chain stopped below, resolved",
				"t.4": "resolved: dead letter, resolved", "t.5": "resolved: dead letter, resolved", "t.6": "delivered: "},
			edges: map[string]string{
				"client→a": "warn: 2 handoff(s) / resumed", "a→b": "warn: 1 handoff(s) / stopped below, resolved",
				"b→d": "warn: 1 handoff(s) / dead letter, resolved"},
			nodes: map[string]string{"client": "0 received", "a": "2 received, 1 failed", "b": "1 received, 1 failed", "d": "1 received, 1 failed"}},
		{name: "superseded", recs: chain(superseded),
			bars: map[string]string{
				"t.1": "failed: stopped here", "t.2": "failed: chain stopped below", "t.3": "failed: chain stopped below",
				"t.4": "dead: dead letter, superseded", "t.5": "failed: dead letter, superseded"},
			edges: map[string]string{
				"client→a": "down: 1 handoff(s) / stopped here", "a→b": "bad: 1 handoff(s) / chain stopped below",
				"b→d": "bad: 1 handoff(s) / dead letter, superseded"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWaterfall(records.TraceTree(tc.recs))
			got := map[string]string{}
			for _, r := range w.Rows {
				got[r.ID] = r.Class + ": " + strings.Join(r.Marks, " · ")
			}
			if !maps.Equal(got, tc.bars) {
				t.Errorf("bars %v\nwant %v", got, tc.bars)
			}
			g := traceGraph(tc.recs)
			edges, nodes := map[string]string{}, map[string]string{}
			for _, e := range g.Edges {
				edges[e.From+"→"+e.To] = e.Class + ": " + e.Label + " / " + e.Label2
			}
			for _, n := range g.Nodes {
				nodes[n.Agent] = n.Sub
			}
			if !maps.Equal(edges, tc.edges) {
				t.Errorf("edges %v\nwant %v", edges, tc.edges)
			}
			if tc.nodes != nil && !maps.Equal(nodes, tc.nodes) {
				t.Errorf("nodes %v\nwant %v", nodes, tc.nodes)
			}
		})
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
