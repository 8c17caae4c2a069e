package intercept_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
)

// TestAgentsJSChain runs real, unmodified agents written with npm
// frameworks through Batons in transparent mode, as a user would: the
// chain A → B → {C, then D} on one Redis (docs/resume.md), D failing once.
//
//   - A's agent is the test: an A2A client sending SendMessage to B by name
//     through A's Baton.
//   - B (testdata/agents-js/b.mjs) is an A2A server (@a2a-js/sdk) whose
//     work is an OpenAI Agents SDK run: the model (a scripted local server)
//     has it call C, then D, through two tools that use the A2A SDK's
//     client at the agents' own addresses. B's pod is intercepted
//     transparently (`baton iptables`); its agent knows nothing of Baton.
//   - C and D (leaf.mjs) are A2A servers whose work is a side effect they
//     count; D fails the first time it is asked each thing (the A2A SDK
//     answers a failed task).
//
// The promise: no agent is re-run by a retry; the first send fails with
// the dead letter where the chain stopped (B's handoff to D); re-sending
// the same message resumes there, C's side effect happening once and D's
// once, and the model paid once per step.
func TestAgentsJSChain(t *testing.T) {
	t.Parallel()
	start := time.Now()
	tp := startAgentsTopo(t)
	t.Logf("namespaces, Redis and the model up in %v", time.Since(start).Round(time.Millisecond))

	t.Run("zero-code OpenTelemetry", func(t *testing.T) {
		tp.resumeOne(t, bOTel, record.CorrelatedByBaggage)
	})
	t.Run("no instrumentation", func(t *testing.T) {
		// The one handling in flight at B's Baton ties B's calls to it.
		tp.resumeOne(t, bPlain, "in-flight")
	})
	t.Logf("TestAgentsJSChain took %v", time.Since(start).Round(time.Millisecond))
}

// settle bounds the wait for a record written in the background.
const settle = 5 * time.Second

// resumeOne sends one task, then re-sends it after D's failure, and checks
// the promise; B's calls must be tied to the handling they serve by
// correlation.
func (tp *agentsTopo) resumeOne(t *testing.T, rt bRuntime, correlation string) {
	start := time.Now()
	ch := tp.startChain(t, rt)
	t.Logf("agents and Batons up in %v", time.Since(start).Round(time.Millisecond))
	task := "dinner for four on Friday (" + randHex(3) + ")"
	msgID := "msg-" + randHex(8)

	// The first send: D fails.
	trace1 := randHex(16)
	first, err := ch.send(msgID, task, trace1)
	if err != nil {
		t.Fatalf("the first send: %v", err)
	}
	t.Logf("the first send answered %v", first)
	b, c, d := ch.b.mustCounts(t), ch.c.mustCounts(t), ch.d.mustCounts(t)
	if b.Runs != 1 || c.Runs != 1 || d.Runs != 1 {
		t.Errorf("after the first send B ran %d times, C %d, D %d: want once each (a retry re-ran an agent)",
			b.Runs, c.Runs, d.Runs)
	}
	if first.ok() {
		t.Errorf("the first send succeeded (%v): D was to fail it", first)
	}
	dead := first.header.Get("Baton-Dead-Letter")
	if dead == "" {
		t.Errorf("the failed answer names no dead letter (Baton-Dead-Letter): %v", first)
	} else {
		checkDeadLetter(t, ch, dead, task, "b→d")
	}
	recs1, err := ch.settled(trace1, settle, whole)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the first send's trace %s:\n%s", trace1, describe(recs1))
	checkPositions(t, "the first send", recs1, correlation)
	_, paid1 := tp.model.count(task)

	// Resume: the same message again.
	trace2 := randHex(16)
	again, err := ch.send(msgID, task, trace2)
	if err != nil {
		t.Fatalf("the re-send: %v", err)
	}
	t.Logf("the re-send answered %v", again)
	if !again.ok() {
		t.Errorf("the re-sent chain did not succeed: %v", again)
	}
	b, c, d = ch.b.mustCounts(t), ch.c.mustCounts(t), ch.d.mustCounts(t)
	if c.Runs != 1 {
		t.Errorf("C ran %d times in all: its side effect ran again when the chain resumed", c.Runs)
	}
	if d.Completed != 1 || d.Runs != 2 {
		t.Errorf("D ran %d times and completed %d: want 2 runs (the failure, then the resumed step) and 1 completion", d.Runs, d.Completed)
	}
	if b.Runs != 2 {
		t.Errorf("B ran %d times in all: want 2 (the first send, the resume)", b.Runs)
	}
	if dead != "" {
		if r, err := ch.record(dead, settle, record.Delivered); err != nil {
			t.Errorf("the dead letter %s: %v", dead, err)
		} else if r.State != record.Delivered || r.ResolvedBy == "" {
			t.Errorf("the dead letter %s is %s (resolved_by %q) after the chain resumed: want delivered, resolved", dead, r.State, r.ResolvedBy)
		}
	}
	recs2, err := ch.settled(trace2, settle, whole)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the re-send's trace %s:\n%s", trace2, describe(recs2))
	checkPositions(t, "the re-send", recs2, correlation)
	_, paid := tp.model.count(task)
	t.Logf("the model was called %d times: %d by the first send, %d by the resume", paid, paid1, paid-paid1)
	if paid1 != 2 || paid != 3 {
		t.Errorf("the model was called %d times by the first send and %d by the resume: want 2 and 1 (the journal answers the steps B had taken)", paid1, paid-paid1)
	}
}

// checkDeadLetter checks that the dead letter an answer named is a dead
// handoff of task on one of the edges given (from→to), and returns it.
func checkDeadLetter(t *testing.T, ch *chain, id, task string, edges ...string) record.Record {
	t.Helper()
	r, err := ch.record(id, settle, record.Dead, record.Delivered)
	switch {
	case err != nil:
		t.Errorf("the dead letter %s: %v", id, err)
	case r.Side != record.Egress || !slices.Contains(edges, r.Edge()) || r.State != record.Dead:
		t.Errorf("Baton-Dead-Letter names %s, %s %s %s: want a dead letter of %s", id, r.Edge(), r.Side, r.State, strings.Join(edges, " or "))
	case r.Request == nil || !strings.Contains(string(r.Request.Body), task):
		t.Errorf("Baton-Dead-Letter names %s, %s, but not the handoff of %q: %s", id, r.Edge(), task, requestBody(r))
	}
	return r
}

func requestBody(r record.Record) string {
	if r.Request == nil {
		return "(no checkpoint)"
	}
	return string(r.Request.Body)
}

// checkPositions checks that B's handoffs to C and D in recs were tied to
// the handling they served by correlation, and keyed by their position.
func checkPositions(t *testing.T, what string, recs []record.Record, correlation string) {
	t.Helper()
	for _, peer := range []string{"c", "d"} {
		s := sends(recs, peer)
		if len(s) == 0 {
			t.Errorf("%s: no record of B's SendMessage to %s in the trace: B's call was not tied to the handoff it served", what, peer)
			continue
		}
		for _, r := range s {
			if r.Correlation != correlation || r.KeySource != record.KeyFromPosition {
				t.Errorf("%s: B→%s %s has correlation %q and key_source %q: want %q and %q",
					what, peer, r.ID, r.Correlation, r.KeySource, correlation, record.KeyFromPosition)
			}
		}
	}
}
