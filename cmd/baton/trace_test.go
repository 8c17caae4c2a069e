package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
)

// TestTraceWarnsOfUntiedHandoffs: baton trace says which agent made
// handoffs it could tie to no inbound one, and how to fix it; a trace
// whose handoffs were all tied says nothing.
func TestTraceWarnsOfUntiedHandoffs(t *testing.T) {
	t.Parallel()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	at := time.Unix(1_800_000_000, 0)
	rec := func(id, parent string, side record.Side, from, to string) record.Record {
		return record.Record{ID: trace + "." + id, ParentID: parent, TraceID: trace, Side: side, From: from, To: to,
			Method: "POST", Target: "/", State: record.Delivered, Status: 200, Hop: 1, Created: at}
	}
	a2b := rec("aaaaaaaaaaaaaaaa", "", record.Egress, "a", "b")
	recvB := rec("bbbbbbbbbbbbbbbb", a2b.ID, record.Ingress, "a", "b")
	b2c := rec("cccccccccccccccc", recvB.ID, record.Egress, "b", "c")
	b2c.Correlation, b2c.KeySource, b2c.Position = record.CorrelatedByInFlight, record.KeyFromPosition, 1

	var out bytes.Buffer
	printTree(&out, trace, []record.Record{a2b, recvB, b2c})
	if s := out.String(); !strings.Contains(s, "key: position 1  tied by in-flight") || strings.Contains(s, "warning") {
		t.Errorf("a trace whose handoffs were tied:\n%s", s)
	}

	recvB.UncorrelatedCalls = 2
	out.Reset()
	printTree(&out, trace, []record.Record{a2b, recvB})
	s := out.String()
	for _, want := range []string{"⚠ 2 call(s) made meanwhile tied to no handling",
		"warning: agent b made 2 handoff(s) while handling this trace that Baton could tie to no inbound handoff",
		"baton.dev/instrument", "baton exec --instrument", "Idempotency-Key"} {
		if !strings.Contains(s, want) {
			t.Errorf("the tree lacks %q:\n%s", want, s)
		}
	}
}

// TestDescribeSpend: a trace's spend line says what was paid, and says a
// cost is unknown (never $0) when no call that went out had both a
// reported usage and a price, naming why.
func TestDescribeSpend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		m    record.ModelSummary
		want string
	}{
		{"paid", record.ModelSummary{Calls: 3, InputTokens: 360, OutputTokens: 90, CostUSD: 0.000288},
			"3 call(s), 360 in + 90 out tokens, $0.000288"},
		{"from the journal and refused", record.ModelSummary{Calls: 3, JournalHits: 1, Refused: 1, InputTokens: 10, OutputTokens: 5, CostUSD: 0.00001},
			"3 call(s), 10 in + 5 out tokens, $0.000010 (1 from the journal, not paid, 1 refused by Baton)"},
		{"usage unreported", record.ModelSummary{Calls: 1, UnknownUsage: 1},
			"1 call(s), 0 in + 0 out tokens, cost unknown (1 with usage unknown)"},
		{"some usage unreported", record.ModelSummary{Calls: 2, UnknownUsage: 1, InputTokens: 100, OutputTokens: 10, CostUSD: 0.000056},
			"2 call(s), 100 in + 10 out tokens, $0.000056 (1 with usage unknown)"},
		{"no price", record.ModelSummary{Calls: 1, Unpriced: 1, InputTokens: 100, OutputTokens: 10},
			"1 call(s), 100 in + 10 out tokens, cost unknown (1 with no price)"},
		{"some unpriced", record.ModelSummary{Calls: 2, Unpriced: 1, InputTokens: 200, OutputTokens: 20, CostUSD: 0.000056},
			"2 call(s), 200 in + 20 out tokens, $0.000056 + 1 unpriced call(s)"},
		{"a model priced at zero", record.ModelSummary{Calls: 1, InputTokens: 100, OutputTokens: 10},
			"1 call(s), 100 in + 10 out tokens, $0.000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := describeSpend(&tc.m); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
