package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// broadcastDoc is the answer a broadcast's agent gets (a met broadcast's
// body, or the members of its broadcast-incomplete problem).
type broadcastDoc struct {
	Type      string   `json:"type"`
	Broadcast string   `json:"broadcast"`
	Mode      string   `json:"mode"`
	Met       bool     `json:"met"`
	Succeeded int      `json:"succeeded"`
	Failed    int      `json:"failed"`
	Pending   int      `json:"pending"`
	Missed    []string `json:"missed"`
	Members   []struct {
		Agent      string          `json:"agent"`
		State      string          `json:"state"`
		Status     int             `json:"status"`
		Body       json.RawMessage `json:"body"`
		BodyText   string          `json:"body_text"`
		Record     string          `json:"record"`
		DeadLetter string          `json:"dead_letter"`
	} `json:"members"`
}

func readBroadcast(t *testing.T, resp *http.Response) broadcastDoc {
	t.Helper()
	var d broadcastDoc
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("broadcast answer %d: %v: %s", resp.StatusCode, err, b)
	}
	return d
}

// TestBroadcastChainOneMemberDown is a chain on one Redis: a client calls
// agent a through its Baton; a broadcasts to the group reviewers (b, c, d)
// and d's Baton is down. b and c get the handoff once; d's is a dead letter
// and the broadcast is answered broadcast-incomplete, which a passes on.
// The client retries with the key it got (agent a re-runs with another
// body): b and c are answered from their windows and run no more, d is
// still down. Then d's Baton is back, and the next retry delivers to d once
// and completes the chain.
func TestBroadcastChainOneMemberDown(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	b, c, d := &stepAgent{}, &stepAgent{}, &stepAgent{}
	bB := node(t, "b", b, "", store())
	cB := node(t, "c", c, "", store())
	dB := node(t, "d", d, "", store())
	dAddr, dUp := switchedAddr(t, dB.IngressAddr()) // refuses connections until dUp
	a := &stepAgent{steps: []string{"reviewers"}, otel: true}
	aB := node(t, "a", a, peerYAML(map[string]string{"b": bB.IngressAddr(), "c": cB.IngressAddr(), "d": dAddr})+
		"groups: {reviewers: {members: [b, c, d], deadline: 10s}}\nretry: {attempts: 1, backoff: 5ms}\n", store())

	call := func(key string) *http.Response {
		h := http.Header{"Content-Type": {"application/json"}, "Traceparent": {tp}}
		if key != "" {
			h.Set("Idempotency-Key", key)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+aB.IngressAddr()+"/review", strings.NewReader(`{"doc":"q3 plan"}`))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := call("")
	key, dl := resp.Header.Get("Idempotency-Key"), resp.Header.Get("Baton-Dead-Letter")
	if resp.StatusCode != http.StatusBadGateway || key == "" || dl == "" {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("first run: %d, key %q, dead letter %q: %s; want 502 naming both", resp.StatusCode, key, dl, body)
	}
	if b.runs.Load() != 1 || c.runs.Load() != 1 {
		t.Fatalf("b ran %d times, c %d; want 1 each", b.runs.Load(), c.runs.Load())
	}
	owner := adminRecord(t, aB.AdminAddr(), dl)
	if owner.From != "a" || owner.To != "d" || owner.State != record.Dead {
		t.Fatalf("the dead letter named is %s→%s %s, want a→d dead", owner.From, owner.To, owner.State)
	}
	if page := deadLetters(t, aB); page.Total != 1 {
		t.Fatalf("a lists %d dead letters, want 1 (d's)", page.Total)
	}

	// The retry: a runs again with another body; b and c do not.
	resp = call(key)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("retry with d down: %d, want 502", resp.StatusCode)
	}
	if a.runs.Load() != 2 || b.runs.Load() != 1 || c.runs.Load() != 1 {
		t.Fatalf("a ran %d, b %d, c %d times; want 2, 1, 1", a.runs.Load(), b.runs.Load(), c.runs.Load())
	}

	// d's Baton comes back where its peers expect it.
	dUp()
	resp = call(key)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("retry with d back: %d %s", resp.StatusCode, body)
	}
	if b.runs.Load() != 1 || c.runs.Load() != 1 || d.runs.Load() != 1 {
		t.Fatalf("b ran %d, c %d, d %d times; want once each", b.runs.Load(), c.runs.Load(), d.runs.Load())
	}
	// The first dead letter was superseded by the retry's, which the last
	// run resolved: none is listed.
	eventually(t, "d's dead letters are settled and unlisted", func() bool {
		return adminRecord(t, aB.AdminAddr(), dl).ResolvedBy != "" && deadLetters(t, aB).Total == 0
	})
	// Each member's handoff is a record of its own, with its own key.
	v := waitTrace(t, aB.AdminAddr(), traceID, func(v records.TraceView) bool { return len(v.Records) >= 3 })
	keys := map[string]string{}
	for _, r := range v.Records {
		if r.Side == record.Egress && r.From == "a" {
			if k, seen := keys[r.To]; seen && k != r.Key {
				t.Errorf("a→%s sent with keys %s and %s: a member's key must not change on a retry", r.To, k, r.Key)
			}
			keys[r.To] = r.Key
		}
	}
	if len(keys) != 3 || keys["b"] == keys["c"] || keys["c"] == keys["d"] {
		t.Errorf("members' keys %v: want three, all different", keys)
	}
}

// TestBroadcastAnswer: the agent's one answer names every member's state,
// status, body and record; a member down is missed with its dead letter.
func TestBroadcastAnswer(t *testing.T) {
	t.Parallel()
	json200 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"verdict":"ship it"}`)
	})
	text200 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "needs work <b>")
	})
	var slowRuns atomic.Int64
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
			slowRuns.Add(1)
		case <-r.Context().Done():
		}
	})
	b, c, e := agentBaton(t, "b", json200), agentBaton(t, "c", text200), agentBaton(t, "e", slow)
	a := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{
		"b": b.IngressAddr(), "c": c.IngressAddr(), "d": closedAddr(t), "e": e.IngressAddr()})+
		"retry: {attempts: 0}\ngroups:\n  panel: {members: [b, c, d]}\n  quick: {members: [e, b], mode: any}\n"+
		"  late: {members: [b, e], deadline: 1500ms}\n  two: {members: [b, c, d], mode: quorum, quorum: 2, concurrency: 1}\n", nil)
	post := func(host string, h http.Header) (*http.Response, broadcastDoc) {
		if h == nil {
			h = http.Header{}
		}
		h.Set("Content-Type", "application/json")
		resp := send(t, a.EgressAddr(), host, http.MethodPost, "/review", `{"doc":"q3"}`, h)
		return resp, readBroadcast(t, resp)
	}

	resp, doc := post("panel", nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.HasSuffix(doc.Type, "#broadcast-incomplete") || doc.Met ||
		doc.Succeeded != 2 || doc.Failed != 1 || strings.Join(doc.Missed, ",") != "d" || len(doc.Members) != 3 {
		t.Fatalf("panel: %d %+v", resp.StatusCode, doc)
	}
	m := doc.Members
	if m[0].Agent != "b" || m[0].State != "answered" || string(m[0].Body) != `{"verdict":"ship it"}` || m[0].Record == "" ||
		m[1].BodyText != "needs work <b>" || m[2].State != "failed" || m[2].DeadLetter == "" ||
		resp.Header.Get("Baton-Dead-Letter") != m[2].DeadLetter {
		t.Fatalf("panel members: %+v", m)
	}
	eventually(t, "b's record says delivered", func() bool {
		r := adminRecord(t, a.AdminAddr(), m[0].Record)
		return r.To == "b" && r.State == record.Delivered && r.Status == 200
	})

	// quorum 2 of b, c, d, one at a time: met by b and c.
	resp, doc = post("two", nil)
	if resp.StatusCode != http.StatusOK || !doc.Met || doc.Succeeded != 2 {
		t.Fatalf("quorum: %d %+v", resp.StatusCode, doc)
	}

	// any: answered as soon as b answers; e's handoff goes on and is
	// delivered after the answer.
	resp, doc = post("quick", nil)
	if resp.StatusCode != http.StatusOK || !doc.Met || doc.Pending != 1 || doc.Members[0].State != "pending" || slowRuns.Load() != 0 {
		t.Fatalf("any: %d %+v, e done %d times: want the answer before e's", resp.StatusCode, doc, slowRuns.Load())
	}
	eventually(t, "e's handoff completes after the answer", func() bool { return slowRuns.Load() == 1 })

	// The deadline: e has not answered after 1.5s, is dead-lettered and
	// missed.
	resp, doc = post("late", nil)
	if resp.StatusCode != http.StatusBadGateway || strings.Join(doc.Missed, ",") != "e" || doc.Members[1].DeadLetter == "" {
		t.Fatalf("late: %d %+v", resp.StatusCode, doc)
	}
	if r := adminRecord(t, a.AdminAddr(), doc.Members[1].DeadLetter); r.To != "e" || r.State != record.Dead {
		t.Fatalf("e's dead letter: %+v", r)
	}

	// An ad-hoc broadcast: Baton-Broadcast lists the peers, whatever Host.
	resp, doc = post("b", http.Header{"Baton-Broadcast": {"b, c"}, "Baton-Broadcast-Mode": {"quorum=2"}})
	if resp.StatusCode != http.StatusOK || doc.Broadcast != "broadcast" || doc.Mode != "quorum" || doc.Succeeded != 2 {
		t.Fatalf("ad hoc: %d %+v", resp.StatusCode, doc)
	}
	for _, tc := range []struct {
		h      http.Header
		status int
		class  string
	}{
		{http.Header{"Baton-Broadcast": {"b, mallory"}}, 403, "unknown-destination"},
		{http.Header{"Baton-Broadcast": {"b,,c"}}, 400, "bad-request"},
		{http.Header{"Baton-Broadcast": {"b, b"}}, 400, "bad-request"},
		{http.Header{"Baton-Broadcast": {"b, c"}, "Baton-Broadcast-Mode": {"quorum=3"}}, 400, "bad-request"},
		{http.Header{"Baton-Broadcast": {"b"}, "Baton-Broadcast-Mode": {"most"}}, 400, "bad-request"},
	} {
		h := tc.h.Clone()
		h.Set("Content-Type", "application/json")
		resp := send(t, a.EgressAddr(), "b", http.MethodPost, "/review", `{}`, h)
		if p := readProblem(t, resp); resp.StatusCode != tc.status || !strings.HasSuffix(p.Type, "#"+tc.class) {
			t.Errorf("%v: %d %s, want %d %s", tc.h, resp.StatusCode, p.Type, tc.status, tc.class)
		}
	}
}

// agentBaton starts agent h behind a Baton named name.
func agentBaton(t *testing.T, name string, h http.Handler) *baton {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return startBaton(t, "agent: "+name+"\nupstream: "+srv.URL+"\n", nil)
}
