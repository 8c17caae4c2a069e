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
