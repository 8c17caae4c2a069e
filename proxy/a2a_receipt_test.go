package proxy_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// TestA2AFailedTaskReceipts: A → B → D, every agent speaking A2A, D failing
// its first task inside a 200. The receipts say so: D's is failed, with
// the agent's status and a failed A2A task as its outcome, under B's dead
// letter; B's (its agent answered a failed task too) is failed, naming
// where the chain stopped. Re-sent, the chain completes: the new receipts
// are delivered, the old ones stay failed, and the dead letter is resolved
// by the new handoff (in a trace of its own: the client sends no trace
// context).
func TestA2AFailedTaskReceipts(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	d := &a2aAgent{failFirst: true}
	b := &a2aAgent{steps: []string{"d"}}
	dB := node(t, "d", d, "", store())
	bB := node(t, "b", b, peerYAML(map[string]string{"d": dB.IngressAddr()}), store())
	aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()}), store())

	msg := a2aMessage("order-18", "book the trip")
	resp := send(t, aB.EgressAddr(), "b", "POST", "/", msg, http.Header{"Content-Type": {"application/json"}})
	answer, _ := io.ReadAll(resp.Body)
	dl := resp.Header.Get("Baton-Dead-Letter")
	if resp.StatusCode != 200 || !strings.Contains(string(answer), "TASK_STATE_FAILED") || dl == "" {
		t.Fatalf("first send: %d %s, Baton-Dead-Letter %q; want B's failed task naming the dead letter", resp.StatusCode, answer, dl)
	}
	trace := record.TraceOf(dl)
	// The sender's record is finished after its answer reaches the client:
	// wait for every receipt to leave "sent".
	settled := func(v records.TraceView) bool {
		for _, r := range v.Records {
			if r.State == record.Sent {
				return false
			}
		}
		return len(v.Records) == 4
	}
	v := waitTrace(t, aB.AdminAddr(), trace, settled)
	const failedTask = "the agent answered 200 with a failed A2A task"
	byEdge := func(v records.TraceView, side record.Side, from, to string) []record.Record {
		var out []record.Record
		for _, r := range v.Records {
			if r.Side == side && r.From == from && r.To == to {
				out = append(out, r)
			}
		}
		return out
	}
	atD := byEdge(v, record.Ingress, "b", "d")
	if len(atD) != 1 || atD[0].State != record.Failed || atD[0].Status != 200 || atD[0].Outcome != failedTask ||
		atD[0].ParentID != dl {
		t.Errorf("D's receipt %+v: want failed 200 (%s) under the dead letter %s", atD, failedTask, dl)
	}
	atB := byEdge(v, record.Ingress, "a", "b")
	if len(atB) != 1 || atB[0].State != record.Failed || atB[0].Status != 200 || atB[0].Outcome != failedTask ||
		atB[0].StoppedAt != dl {
		t.Errorf("B's receipt %+v: want failed 200 (%s), stopped at %s", atB, failedTask, dl)
	}
	if toB := byEdge(v, record.Egress, "a", "b"); len(toB) != 1 || toB[0].State != record.Delivered || toB[0].StoppedAt != dl {
		t.Errorf("a → b %+v: want delivered, stopped at the dead letter below (not dead-lettered again)", toB)
	}

	resp = send(t, aB.EgressAddr(), "b", "POST", "/", msg, http.Header{"Content-Type": {"application/json"}})
	answer, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(answer), "TASK_STATE_COMPLETED") {
		t.Fatalf("re-sent: %d %s; want B's completed task", resp.StatusCode, answer)
	}
	// The client sent no trace context: the re-sent chain is a trace of
	// its own, and the dead letter names the handoff that resolved it there.
	var resolvedBy string
	v = waitTrace(t, aB.AdminAddr(), trace, func(v records.TraceView) bool {
		for _, r := range v.Records {
			if r.ID == dl && r.State == record.Delivered && r.ResolvedBy != "" {
				resolvedBy = r.ResolvedBy
				return true
			}
		}
		return false
	})
	if atD = byEdge(v, record.Ingress, "b", "d"); len(atD) != 1 || atD[0].State != record.Failed {
		t.Errorf("D's first receipt %+v: want it still failed once its dead letter is resolved", atD)
	}
	again := waitTrace(t, aB.AdminAddr(), record.TraceOf(resolvedBy), settled)
	for _, r := range again.Records {
		if r.Side == record.Ingress && (r.State != record.Delivered || r.Outcome != "delivered to the agent") {
			t.Errorf("the re-sent chain's receipt %s→%s is %s (%s); want delivered to the agent", r.From, r.To, r.State, r.Outcome)
		}
		if r.Side == record.Ingress && r.From == "b" && r.ParentID != resolvedBy {
			t.Errorf("D's second receipt is under %s; want under the handoff that resolved the dead letter (%s)", r.ParentID, resolvedBy)
		}
	}
}
