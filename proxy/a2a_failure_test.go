package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/batonproxy/baton/handoff/record"
)

// a2aAgent is an A2A agent as the SDKs' examples write it: each message it
// sends has a fresh messageId, it forwards no trace context, and it reports
// a failure as a failed task inside a 200. It sends a message to each of its
// steps (peers, in order) through its Baton's egress, and fails its own task
// when one of theirs failed; a leaf fails its first run when failFirst.
type a2aAgent struct {
	steps     []string
	failFirst bool

	egress atomic.Pointer[string]
	runs   atomic.Int64
	done   atomic.Int64
}

func (a *a2aAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &req)
	run := a.runs.Add(1)
	state := "TASK_STATE_COMPLETED"
	for _, peer := range a.steps {
		msg := a2aMessage(fmt.Sprintf("%s-%d-%s", peer, run, randomSpan()), "do your part")
		out, _ := http.NewRequest(http.MethodPost, "http://"+*a.egress.Load()+"/", strings.NewReader(msg))
		out.Host = peer
		out.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			state = "TASK_STATE_FAILED"
			break
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(answer), "TASK_STATE_COMPLETED") {
			state = "TASK_STATE_FAILED"
			break
		}
	}
	if a.failFirst && run == 1 {
		state = "TASK_STATE_FAILED"
	}
	if state == "TASK_STATE_COMPLETED" {
		a.done.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"task":{"id":"task-%d","contextId":"ctx-%d","status":{"state":%q}}}}`,
		req.ID, run, run, state)
}

func (a *a2aAgent) useEgress(addr string) { a.egress.Store(&addr) }

func a2aMessage(id, text string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"` + id +
		`","role":"ROLE_USER","parts":[{"text":"` + text + `"}]}}}`
}

// TestChainA2AFailedTask: A → B → {C, then D} where every agent speaks A2A
// as the SDKs write it, and D fails its first task (a failed task in a
// 200). D's failure is a dead letter at B, named on B's failed task to the
// client; no window keeps a failed task. The client re-sends the same
// message: B runs again, C's first answer is replayed from its window, D
// completes once.
func TestChainA2AFailedTask(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	c, d := &a2aAgent{}, &a2aAgent{failFirst: true}
	b := &a2aAgent{steps: []string{"c", "d"}}
	cB := node(t, "c", c, "", store())
	dB := node(t, "d", d, "", store())
	bB := node(t, "b", b, peerYAML(map[string]string{"c": cB.IngressAddr(), "d": dB.IngressAddr()}), store())
	aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()}), store())

	msg := a2aMessage("order-17", "book the trip")
	resp := send(t, aB.EgressAddr(), "b", "POST", "/", msg, http.Header{"Content-Type": {"application/json"}})
	answer, _ := io.ReadAll(resp.Body)
	dl := resp.Header.Get("Baton-Dead-Letter")
	if resp.StatusCode != 200 || !strings.Contains(string(answer), "TASK_STATE_FAILED") || dl == "" {
		t.Fatalf("first send: %d %s, Baton-Dead-Letter %q; want B's failed task naming the dead letter", resp.StatusCode, answer, dl)
	}
	if b.runs.Load() != 1 || c.runs.Load() != 1 || d.runs.Load() != 1 {
		t.Fatalf("B ran %d times, C %d, D %d; want 1 each", b.runs.Load(), c.runs.Load(), d.runs.Load())
	}
	if r := adminRecord(t, bB.AdminAddr(), dl); r.From != "b" || r.To != "d" || r.State != record.Dead ||
		!strings.Contains(r.Error, "failed A2A task") {
		t.Fatalf("the dead letter named: %s→%s %s (%s); want b→d dead, a failed task", r.From, r.To, r.State, r.Error)
	}
	if page := deadLetters(t, aB); page.Total != 0 {
		t.Errorf("a lists %d dead letter(s); want none: the failure is listed once, at b", page.Total)
	}

	resp = send(t, aB.EgressAddr(), "b", "POST", "/", msg, http.Header{"Content-Type": {"application/json"}})
	answer, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(answer), "TASK_STATE_COMPLETED") {
		t.Fatalf("re-sent: %d %s; want B's completed task", resp.StatusCode, answer)
	}
	if b.runs.Load() != 2 || c.runs.Load() != 1 || d.done.Load() != 1 || d.runs.Load() != 2 {
		t.Errorf("B ran %d times, C %d, D %d (completed %d); want 2, 1, 2 (1)", b.runs.Load(), c.runs.Load(), d.runs.Load(), d.done.Load())
	}
	eventually(t, "the dead letter is resolved", func() bool {
		return adminRecord(t, bB.AdminAddr(), dl).State == record.Delivered && deadLetters(t, bB).Total == 0
	})
}
