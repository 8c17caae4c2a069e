package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// Agents as they are written forward no trace context: neither traceparent
// nor baggage. These tests run the chain A → B → {C, then D} on one Redis
// with such a B, D's agent failing (500) once, on the shipped defaults.

// TestChainAgentForwardingNothing: B serves one request at a time and
// forwards nothing. Its calls are tied to the one handling in flight at its
// Baton: they get keys by position, in A's trace. The first send runs B, C
// and D once each (D's 500 is final: no Baton retries an agent's failure);
// the client gets B's 502 naming the dead letter at B. The re-send with the
// key it got back runs B again; C is answered from its window and D
// completes once.
func TestChainAgentForwardingNothing(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	f := startFanOf(t, store, &stepAgent{steps: []string{"c", "d"}}, &stepAgent{answer: failOnce}, "", nil)
	c, d, bAgent, bB := f.c, f.d, f.b, f.bB
	aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()}), store())

	resp := send(t, aB.EgressAddr(), "b", "POST", "/work", `{"task":"pay vendor-17"}`, http.Header{"Content-Type": {"application/json"}})
	dl, key := resp.Header.Get("Baton-Dead-Letter"), resp.Header.Get("Idempotency-Key")
	if resp.StatusCode != http.StatusBadGateway || dl == "" || key == "" {
		t.Fatalf("first send: %d, Baton-Dead-Letter %q, Idempotency-Key %q; want 502 naming both", resp.StatusCode, dl, key)
	}
	if b, c, d := bAgent.runs.Load(), c.runs.Load(), d.runs.Load(); b != 1 || c != 1 || d != 1 {
		t.Fatalf("after the first send B ran %d times, C %d, D %d; want 1 each (no retry runs an agent again)", b, c, d)
	}
	if owner := adminRecord(t, bB.AdminAddr(), dl); owner.From != "b" || owner.To != "d" || owner.State != record.Dead {
		t.Fatalf("the dead letter named is %s→%s %s; want b→d dead", owner.From, owner.To, owner.State)
	}
	if page := deadLetters(t, aB); page.Total != 0 {
		t.Errorf("a lists %d dead letter(s); want none: the failure is listed once, at b", page.Total)
	}

	resp = send(t, aB.EgressAddr(), "b", "POST", "/work", `{"task":"pay vendor-17"}`, http.Header{
		"Content-Type": {"application/json"}, "Idempotency-Key": {key}})
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("re-sent: %d %s", resp.StatusCode, b)
	}
	if b, c, d := bAgent.runs.Load(), c.runs.Load(), d.done.Load(); b != 2 || c != 1 || d != 1 {
		t.Errorf("B ran %d times, C %d, D completed %d; want 2, 1, 1", b, c, d)
	}

	// B's calls joined A's trace (the first send's), tied to their handling
	// by the one in flight; the dead letter is resolved by the re-send.
	traceID, _, _ := strings.Cut(dl, ".")
	v := waitTrace(t, aB.AdminAddr(), traceID, func(v records.TraceView) bool {
		n := 0
		for _, r := range v.Records {
			if r.Side == record.Egress && r.From == "b" && r.State == record.Delivered {
				n++
			}
		}
		return n == 2
	})
	for _, r := range v.Records {
		if r.Side != record.Egress || r.From != "b" {
			continue
		}
		if r.Correlation != record.CorrelatedByInFlight || r.KeySource != record.KeyFromPosition || r.ParentID == "" {
			t.Errorf("b's handoff %s → %s: correlation %q, key %q, parent %q; want in-flight, position, a receipt",
				r.ID, r.To, r.Correlation, r.KeySource, r.ParentID)
		}
	}
}

// TestChainAgentsConcurrentUncorrelated: B handles two requests at once
// and forwards nothing, so no call can be tied to either handling. Still no
// Baton retries an agent's failure: each agent runs once per request. The
// calls get keys from their content (said in the record, and counted), so a
// re-send, whose bodies differ, runs C again: the limit docs/resume.md
// states, and the fix it names.
func TestChainAgentsConcurrentUncorrelated(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	// The two handlings overlap from before their first call until after
	// their last.
	arrivedAll, doneAll := make(chan struct{}), make(chan struct{})
	var arrived, done atomic.Int64
	barrier := func(n *atomic.Int64, all chan struct{}) func(int64) {
		return func(run int64) {
			if n.Add(1) == 2 {
				close(all)
			}
			if run <= 2 {
				<-all
			}
		}
	}
	b := &stepAgent{steps: []string{"c", "d"}, before: barrier(&arrived, arrivedAll), after: barrier(&done, doneAll)}
	d := &stepAgent{answer: failOnce}
	f := startFanOf(t, store, b, d, "", nil)
	aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": f.bB.IngressAddr()}), store())

	var wg sync.WaitGroup
	statuses := make([]int, 2)
	traces := []string{randomSpan() + randomSpan(), randomSpan() + randomSpan()}
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := send(t, aB.EgressAddr(), "b", "POST", "/work", fmt.Sprintf(`{"task":"order %d"}`, i),
				http.Header{"Content-Type": {"application/json"}, "Traceparent": {"00-" + traces[i] + "-" + randomSpan() + "-01"}})
			io.Copy(io.Discard, resp.Body)
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	if f.b.runs.Load() != 2 || f.c.runs.Load() != 2 || d.runs.Load() != 2 {
		t.Fatalf("B ran %d times, C %d, D %d; want 2 each: no retry runs an agent again", f.b.runs.Load(), f.c.runs.Load(), d.runs.Load())
	}
	failed := 0
	for _, st := range statuses {
		if st >= 500 {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("statuses %v; want one failure (D's first run)", statuses)
	}
	// Each of B's handoffs says it was not tied to a handling.
	page := deadLetters(t, f.bB)
	if page.Total != 1 {
		t.Fatalf("b lists %d dead letters, want 1 (the b→d that failed)", page.Total)
	}
	if r := page.Records[0]; r.Correlation != record.CorrelationAmbiguous && r.Correlation != "" {
		t.Errorf("b's dead letter is correlated %q; want none (two handlings in flight)", r.Correlation)
	} else if r.KeySource != record.KeyFromContent {
		t.Errorf("b's dead letter has a key from %q; want content", r.KeySource)
	}
	// B's Baton says so: in its log, naming the fix, and on B's receipts.
	if l := f.bB.log.String(); !strings.Contains(l, "handoffs tied to no inbound handoff") || !strings.Contains(l, "baton exec --instrument") {
		t.Errorf("b's log does not warn of its uncorrelated handoffs:\n%s", l)
	}
	for _, trace := range traces {
		v := waitTrace(t, aB.AdminAddr(), trace, func(v records.TraceView) bool {
			for _, r := range v.Records {
				if r.Side == record.Ingress && r.To == "b" && r.State != record.Sent {
					return true
				}
			}
			return false
		})
		for _, r := range v.Records {
			if r.Side == record.Ingress && r.To == "b" && r.UncorrelatedCalls != 4 {
				t.Errorf("b's receipt %s counts %d uncorrelated calls; want 4 (both handlings' calls to c and d, made while it was in flight)",
					r.ID, r.UncorrelatedCalls)
			}
		}
	}
}
