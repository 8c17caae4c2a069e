package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batonproxy/baton/compensation"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
)

// sagaAgent is one agent of a booking chain: on its work path it performs
// its side effect, calls the next agent through its Baton, and reports the
// effect in its answer whatever the next one answered; on its undo path it
// undoes the effect (failing the first failUndo calls without doing so).
type sagaAgent struct {
	effect, work, undo string // "booking", "/book", "/cancel"
	next, nextPath     string // "" for the last agent
	down               *atomic.Bool
	failUndo           int32
	undoStatus         int           // what a failing undo answers: 503 with Retry-After unless set
	seq                *atomic.Int64 // shared by the chain: the order things happened in

	egress   string
	did      atomic.Int32
	undoHits atomic.Int32
	mu       sync.Mutex
	undone   []string // the bodies of the undos that succeeded
	undoneAt []int64
}

func (a *sagaAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case a.undo:
		if a.undoHits.Add(1) <= a.failUndo {
			status := http.StatusServiceUnavailable
			if a.undoStatus != 0 {
				status = a.undoStatus
			} else {
				w.Header().Set("Retry-After", "0") // the agent says it did not act
			}
			http.Error(w, "refund service unavailable", status)
			return
		}
		a.mu.Lock()
		a.undone, a.undoneAt = append(a.undone, string(body)), append(a.undoneAt, a.seq.Add(1))
		a.mu.Unlock()
		io.WriteString(w, `{"undone":true}`)
		return
	case a.work:
	default:
		http.NotFound(w, r)
		return
	}
	if a.down != nil && a.down.Load() {
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	n := a.did.Add(1)
	a.seq.Add(1)
	status := http.StatusOK
	if a.next != "" {
		req, _ := http.NewRequest(http.MethodPost, "http://"+a.egress+a.nextPath, strings.NewReader(`{"amount":120}`))
		req.Host = a.next
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", r.Header.Get("Traceparent"))
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil || resp.StatusCode >= 300 {
			status = http.StatusBadGateway
		}
		if resp != nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	w.Header().Set("Baton-Side-Effects", a.effect)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"%s_id":"%s-%d"}`, a.effect, a.effect[:2], n)
}

// sagaNode starts agent a, named name, behind a Baton configured by yaml
// (agent and upstream added) on store, and points a at its egress.
func sagaNode(t *testing.T, name string, a *sagaAgent, yaml string, store state.Store, opts func(*proxy.Options)) *baton {
	t.Helper()
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	bt := startBatonWith(t, "agent: "+name+"\nupstream: "+srv.URL+"\n"+yaml, store, opts)
	a.egress = bt.EgressAddr()
	return bt
}

// TestAbandonCompensatesInReverse is a chain on one Redis: a → b (books)
// → c (charges) → d, which fails and is dead-lettered at c's Baton. The
// trace is abandoned at a's Baton twice at once: b's Baton refunds c's
// charge (the refund fails once and is retried), then a's Baton cancels
// b's booking, each exactly once, each body made from the original handoff
// and its answer. Abandoning again changes nothing, and the dead letter is
// no longer replayed. A second trace, resumed once d is back, cannot be
// abandoned and is never compensated.
func TestAbandonCompensatesInReverse(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	var seq atomic.Int64
	var dDown atomic.Bool
	dDown.Store(true)
	d := &sagaAgent{effect: "shipment", work: "/ship", undo: "/unship", down: &dDown, seq: &seq}
	c := &sagaAgent{effect: "charge", work: "/charge", undo: "/refund", next: "d", nextPath: "/ship", failUndo: 1, seq: &seq}
	b := &sagaAgent{effect: "booking", work: "/book", undo: "/cancel", next: "c", nextPath: "/charge", seq: &seq}
	start := func(name string, a *sagaAgent, yaml string) *baton {
		return sagaNode(t, name, a, yaml, store(), withMetrics(t))
	}
	// Every handoff is signed, compensations included, and each receiver
	// takes only its sender's key.
	dir := t.TempDir()
	keys := map[string]trustID{}
	for _, name := range []string{"a", "b", "c"} {
		keys[name] = newTrustID(t, dir, name+"-2026")
	}
	trusts := func(peer string) string { return "trust: {peers: {" + peer + ": [" + keys[peer].line() + "]}}\n" }
	dB := start("d", d, trusts("c"))
	cB := start("c", c, keys["c"].identity()+trusts("b")+peerYAML(map[string]string{"d": dB.IngressAddr()})+
		"edges: [{from: b}, {to: d}]\nretry: {attempts: 2, backoff: 5ms}\n")
	bB := start("b", b, keys["b"].identity()+trusts("a")+peerYAML(map[string]string{"c": cB.IngressAddr()})+`edges:
  - {from: a}
  - to: c
    retry: {attempts: 3, backoff: 5ms, agent_retry_after: true}
    side_effects:
      - name: charge
        compensate: {path: /refund, body: '{"charge_id": {{json .Response.charge_id}}, "amount": {{json .Request.amount}}}'}
`)
	aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+keys["a"].identity()+peerYAML(map[string]string{"b": bB.IngressAddr()})+`edges:
  - to: b
    side_effects:
      - name: booking
        compensate: {path: /cancel, body: '{"booking_id": {{json .Response.booking_id}}, "reason": "trace abandoned"}'}
`, store(), withMetrics(t))

	run := func(trace string) *http.Response {
		return send(t, aB.EgressAddr(), "b", http.MethodPost, "/book", `{"trip":"LIS-NYC"}`,
			http.Header{"Content-Type": {"application/json"}, "Traceparent": {"00-" + trace + "-b7ad6b7169203331-01"}})
	}
	const trace = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
	resp := run(trace)
	dl := resp.Header.Get("Baton-Dead-Letter")
	if resp.StatusCode != http.StatusBadGateway || dl == "" || b.did.Load() != 1 || c.did.Load() != 1 {
		t.Fatalf("the chain answered %d (dead letter %q), b booked %d, c charged %d; want 502 naming d's dead letter, one of each",
			resp.StatusCode, dl, b.did.Load(), c.did.Load())
	}

	// The records are written off the request path.
	waitTrace(t, aB.AdminAddr(), trace, func(v records.TraceView) bool {
		effects := 0
		for _, r := range v.Records {
			if r.Side == "egress" {
				effects += len(r.Effects)
			}
		}
		return effects == 2
	})
	abandon := func() (int, compensation.Abandonment) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+aB.AdminAddr()+"/v1/traces/"+trace+"/abandon?wait=20s",
			strings.NewReader(`{"reason":"the trip was cancelled"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a compensation.Abandonment
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("abandon answered %d: %s", resp.StatusCode, raw)
		}
		return resp.StatusCode, a
	}
	var wg sync.WaitGroup
	results := make([]compensation.Abandonment, 2)
	for i := range results {
		wg.Go(func() {
			st, a := abandon()
			if st != http.StatusOK {
				t.Errorf("abandon %d answered %d", i, st)
			}
			results[i] = a
		})
	}
	wg.Wait()
	for i, a := range results {
		if !a.Settled || len(a.Steps) != 2 || a.Reason != "the trip was cancelled" {
			t.Fatalf("abandon %d: %+v; want settled with two steps", i, a)
		}
		first, second := a.Steps[0], a.Steps[1]
		if first.Effect != "charge" || first.From != "b" || first.State != "undone" || first.Compensation == "" ||
			second.Effect != "booking" || second.From != "a" || second.State != "undone" {
			t.Fatalf("abandon %d steps: %+v; want the charge undone by b, then the booking by a", i, a.Steps)
		}
	}
	if len(c.undone) != 1 || len(b.undone) != 1 || c.undoHits.Load() != 2 {
		t.Fatalf("refunds %d (of %d calls), cancellations %d; want one of each, the refund after one failure",
			len(c.undone), c.undoHits.Load(), len(b.undone))
	}
	if c.undoneAt[0] > b.undoneAt[0] {
		t.Fatal("the booking was cancelled before the charge was refunded")
	}
	if c.undone[0] != `{"charge_id": "ch-1", "amount": 120}` || b.undone[0] != `{"booking_id": "bo-1", "reason": "trace abandoned"}` {
		t.Fatalf("compensation bodies: refund %s, cancel %s", c.undone[0], b.undone[0])
	}

	// Each compensation was a signed handoff, verified by its receiver.
	view := waitTrace(t, aB.AdminAddr(), trace, func(v records.TraceView) bool {
		n := 0
		for _, r := range v.Records {
			if r.Compensates != "" && r.Side == "ingress" {
				n++
			}
		}
		return n == 3 // the refund's two tries, the cancellation
	})
	for _, r := range view.Records {
		if r.Compensates != "" && r.Side == "ingress" && r.SenderKeyID != r.From+"-2026" {
			t.Fatalf("the compensation %s→%s was received with key %q, want %s's", r.From, r.To, r.SenderKeyID, r.From)
		}
	}

	// Once more: nothing runs again; the dead letter is not replayed.
	if st, a := abandon(); st != http.StatusOK || !a.Settled || len(c.undone) != 1 || len(b.undone) != 1 {
		t.Fatalf("a third abandon: %d %+v, refunds %d, cancellations %d", st, a, len(c.undone), len(b.undone))
	}
	dDown.Store(false)
	if st := adminPost(t, cB.AdminAddr(), "/v1/deadletters/"+dl+"/replay", nil); st != http.StatusConflict {
		t.Fatalf("replaying the abandoned trace's dead letter: %d, want 409 trace-abandoned", st)
	}
	if d.did.Load() != 0 {
		t.Fatal("d ran in an abandoned trace")
	}

	// A resumed trace is never compensated.
	dDown.Store(true)
	const resumed = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
	resp = run(resumed)
	dl2 := resp.Header.Get("Baton-Dead-Letter")
	dDown.Store(false)
	if st := adminPost(t, cB.AdminAddr(), "/v1/deadletters/"+dl2+"/replay", nil); st != http.StatusOK {
		t.Fatalf("resuming the second trace: %d", st)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+aB.AdminAddr()+"/v1/traces/"+resumed+"/abandon", nil)
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if p := readProblem(t, r2); r2.StatusCode != http.StatusConflict || !strings.HasSuffix(p.Type, "#not-abandonable") {
		t.Fatalf("abandoning a resumed trace: %d %+v; want 409 not-abandonable", r2.StatusCode, p)
	}
	if len(c.undone) != 1 || len(b.undone) != 1 || d.did.Load() != 1 {
		t.Fatalf("after the resumed trace: refunds %d, cancellations %d, shipments %d; want 1, 1, 1", len(c.undone), len(b.undone), d.did.Load())
	}
	s := scrapeMetrics(t, bB.AdminAddr())
	if v, _ := s.value("baton_compensations_total", map[string]string{"outcome": "undone"}); v != 1 {
		t.Errorf("b's baton_compensations_total{outcome=undone} = %v, want 1", v)
	}
}

// TestAbandonByManifest: a's handoff to b carries the side-effect manifest
// in its envelope (no config declares anything); b opens a ticket, says so
// in its answer envelope's completed list, and fails because c is down.
// b's Baton abandons the trace on its own, once its dead letter is a second
// old (compensation.abandon_after) or when it is dropped
// (compensation.abandon_dropped), and a's Baton closes the ticket once,
// with a body made from a's own request.
func TestAbandonByManifest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, yaml, by string }{
		{"after-deadline", "compensation: {abandon_after: 1s}\n", "compensation.abandon_after"},
		{"dropped", "compensation: {abandon_dropped: true}\n", "admin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			abandonByManifest(t, c.yaml, c.by, c.by == "admin")
		})
	}
}

func abandonByManifest(t *testing.T, comp, by string, drop bool) {
	store := sharedStore(t)
	var closes atomic.Int32
	var closeBody atomic.Value
	bAgent := &relayFunc{fn: func(w http.ResponseWriter, r *http.Request, egress string) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/close" {
			closes.Add(1)
			closeBody.Store(string(body))
			return
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+egress+"/work", strings.NewReader(`{}`))
		req.Host = "c"
		req.Header.Set("Traceparent", r.Header.Get("Traceparent"))
		if resp, err := http.DefaultTransport.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
		w.Header().Set("Content-Type", "application/vnd.baton.handoff+json")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, `{"schema_version":"1.0.0","task":{"id":"t-77","intent":"open a ticket"},"completed":[{"id":"ticket","summary":"opened T-9"}]}`)
	}}
	cSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusInternalServerError) }))
	t.Cleanup(cSrv.Close)
	cB := startBatonWith(t, "agent: c\nupstream: "+cSrv.URL+"\n", store(), nil)
	bSrv := httptest.NewServer(bAgent)
	t.Cleanup(bSrv.Close)
	bB := startBatonWith(t, "agent: b\nupstream: "+bSrv.URL+"\n"+peerYAML(map[string]string{"c": cB.IngressAddr()})+
		"retry: {attempts: 1}\n"+comp, store(), nil)
	bAgent.egress = bB.EgressAddr()
	aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()}), store(), nil)

	trace := "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"
	if drop {
		trace = "d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4"
	}
	env := `{"schema_version":"1.0.0","task":{"id":"t-77","intent":"open a ticket for the outage"},
	  "compensations":[{"effect":"ticket","path":"/close","body":"{\"close\": {{json .Request.task.id}}}"}]}`
	resp := send(t, aB.EgressAddr(), "b", http.MethodPost, "/tickets", env,
		http.Header{"Content-Type": {"application/vnd.baton.handoff+json"}, "Traceparent": {"00-" + trace + "-b7ad6b7169203331-01"}})
	dl := resp.Header.Get("Baton-Dead-Letter")
	if resp.StatusCode != http.StatusBadGateway || dl == "" {
		t.Fatalf("the chain answered %d, dead letter %q", resp.StatusCode, dl)
	}
	if drop {
		req, _ := http.NewRequest(http.MethodDelete, "http://"+bB.AdminAddr()+"/v1/deadletters/"+dl, nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil || r.StatusCode != http.StatusNoContent {
			t.Fatalf("dropping the dead letter: %v %v", r, err)
		}
	}
	eventually(t, "the ticket closed", func() bool { return closes.Load() == 1 })
	var a compensation.Abandonment
	eventually(t, "the abandonment settled", func() bool {
		return adminGet(t, aB.AdminAddr(), "/v1/traces/"+trace+"/abandon", &a) == http.StatusOK && a.Settled
	})
	if a.By != by || len(a.Steps) != 1 || a.Steps[0].Effect != "ticket" || a.Steps[0].State != "undone" {
		t.Fatalf("abandonment %+v", a)
	}
	if got := closeBody.Load(); got != `{"close": "t-77"}` || closes.Load() != 1 {
		t.Fatalf("closed %d times with %v", closes.Load(), got)
	}
}

// relayFunc is an agent whose handler knows its Baton's egress.
type relayFunc struct {
	egress string
	fn     func(w http.ResponseWriter, r *http.Request, egress string)
}

func (a *relayFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.fn(w, r, a.egress) }

// draftChain starts a → b (drafts) → c (down) on the stores store makes,
// b's agent as given; aYAML configures a's edges. It returns a's Baton.
func draftChain(t *testing.T, store func() state.Store, b *sagaAgent, aYAML string) *baton {
	t.Helper()
	var down atomic.Bool
	down.Store(true)
	c := &sagaAgent{effect: "shipment", work: "/ship", undo: "/unship", down: &down, seq: b.seq}
	cSrv, bSrv := httptest.NewServer(c), httptest.NewServer(b)
	t.Cleanup(cSrv.Close)
	t.Cleanup(bSrv.Close)
	cB := startBatonWith(t, "agent: c\nupstream: "+cSrv.URL+"\n", store(), nil)
	bB := startBatonWith(t, "agent: b\nupstream: "+bSrv.URL+"\n"+peerYAML(map[string]string{"c": cB.IngressAddr()})+"retry: {attempts: 1}\n", store(), nil)
	b.egress = bB.EgressAddr()
	return startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()})+aYAML, store(), nil)
}

// TestAbandonFailedCompensation: b's discard answers 500 (not retried), so
// the step fails and its compensation is a dead letter of its own at a's
// Baton, named in the step. Replaying that dead letter (allowed in the
// abandoned trace) undoes the draft, and the step reads undone.
func TestAbandonFailedCompensation(t *testing.T) {
	t.Parallel()
	b := &sagaAgent{effect: "draft", work: "/draft", undo: "/discard", next: "c", nextPath: "/ship", seq: new(atomic.Int64),
		failUndo: 1, undoStatus: http.StatusInternalServerError}
	aB := draftChain(t, sharedStore(t), b, "edges: [{to: b, side_effects: [{name: draft, compensate: {path: /discard}}]}]\n")

	const trace = "f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6"
	if resp := send(t, aB.EgressAddr(), "b", http.MethodPost, "/draft", `{}`,
		http.Header{"Content-Type": {"application/json"}, "Traceparent": {"00-" + trace + "-b7ad6b7169203331-01"}}); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("the chain answered %d", resp.StatusCode)
	}
	var a compensation.Abandonment
	req, _ := http.NewRequest(http.MethodPost, "http://"+aB.AdminAddr()+"/v1/traces/"+trace+"/abandon?wait=10s", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	decodeBody(t, resp, &a)
	if len(a.Steps) != 1 || a.Steps[0].State != "failed" || a.Steps[0].DeadLetter == "" || !strings.Contains(a.Steps[0].Why, "500") {
		t.Fatalf("abandonment %+v; want the draft's step failed, naming its dead letter", a)
	}
	if owner := adminRecord(t, aB.AdminAddr(), a.Steps[0].DeadLetter); owner.State != "dead" || owner.Compensates == "" {
		t.Fatalf("the step's dead letter is %s, compensates %q", owner.State, owner.Compensates)
	}
	if st := adminPost(t, aB.AdminAddr(), "/v1/deadletters/"+a.Steps[0].DeadLetter+"/replay", nil); st != http.StatusOK {
		t.Fatalf("replaying the compensation's dead letter: %d", st)
	}
	eventually(t, "the step undone", func() bool {
		return adminGet(t, aB.AdminAddr(), "/v1/traces/"+trace+"/abandon", &a) == http.StatusOK && a.Steps[0].State == "undone"
	})
	if len(b.undone) != 1 || b.undoHits.Load() != 2 {
		t.Fatalf("b discarded %d drafts in %d calls; want 1 in 2", len(b.undone), b.undoHits.Load())
	}
}

// TestAbandonGatedCompensation: the cancellation's edge holds it for a
// person (confirm on its target). The step reads held, not undone, and the
// abandonment is not settled until the approval; once approved and
// delivered, the step is undone.
func TestAbandonGatedCompensation(t *testing.T) {
	t.Parallel()
	b := &sagaAgent{effect: "draft", work: "/draft", undo: "/discard", next: "c", nextPath: "/ship", seq: new(atomic.Int64)}
	aB := draftChain(t, sharedStore(t), b, "admin_token: "+consoleToken+"\n"+
		"edges: [{to: b, confirm: {when: [{target: /discard}]}, side_effects: [{name: draft, compensate: {path: /discard}}]}]\n")

	const trace = "a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7"
	if resp := send(t, aB.EgressAddr(), "b", http.MethodPost, "/draft", `{}`,
		http.Header{"Content-Type": {"application/json"}, "Traceparent": {"00-" + trace + "-b7ad6b7169203331-01"}}); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("the chain answered %d", resp.StatusCode)
	}
	admin := func(method, path string, v any) int {
		req, _ := http.NewRequest(method, "http://"+aB.AdminAddr()+path, strings.NewReader(`{"reason":"ok"}`))
		req.Header.Set("Authorization", "Bearer "+consoleToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if v != nil {
			_ = json.NewDecoder(resp.Body).Decode(v)
		}
		return resp.StatusCode
	}
	var a compensation.Abandonment
	if st := admin(http.MethodPost, "/v1/traces/"+trace+"/abandon?wait=3s", &a); st != http.StatusOK {
		t.Fatalf("abandon: %d", st)
	}
	if a.Settled || len(a.Steps) != 1 || a.Steps[0].State != "held" || len(b.undone) != 0 {
		t.Fatalf("abandonment %+v, discarded %d; want the step held, nothing discarded", a, len(b.undone))
	}
	if st := admin(http.MethodPost, "/v1/approvals/"+a.Steps[0].Compensation+"/approve", nil); st != http.StatusOK {
		t.Fatalf("approving the compensation: %d", st)
	}
	eventually(t, "the step undone", func() bool {
		return admin(http.MethodGet, "/v1/traces/"+trace+"/abandon", &a) == http.StatusOK && a.Settled && a.Steps[0].State == "undone"
	})
	if len(b.undone) != 1 {
		t.Fatalf("b discarded %d drafts, want 1", len(b.undone))
	}
}

// TestAbandonAtOnce abandons a failed chain a → b (books) → c (charges) →
// d (down) the moment its answer is back, as a script that gives up on
// failure does, when the latest handoffs' side effects may not be written
// yet (records are written off the request path): the charge is still
// refunded before the booking is cancelled, in every trace.
func TestAbandonAtOnce(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	var seq atomic.Int64
	var down atomic.Bool
	down.Store(true)
	d := &sagaAgent{effect: "shipment", work: "/ship", undo: "/unship", down: &down, seq: &seq}
	c := &sagaAgent{effect: "charge", work: "/charge", undo: "/refund", next: "d", nextPath: "/ship", seq: &seq}
	b := &sagaAgent{effect: "booking", work: "/book", undo: "/cancel", next: "c", nextPath: "/charge", seq: &seq}
	start := func(name string, a *sagaAgent, yaml string) *baton { return sagaNode(t, name, a, yaml, store(), nil) }
	dB := start("d", d, "")
	cB := start("c", c, peerYAML(map[string]string{"d": dB.IngressAddr()})+"retry: {attempts: 1}\n")
	bB := start("b", b, peerYAML(map[string]string{"c": cB.IngressAddr()})+
		`edges: [{from: a}, {to: c, side_effects: [{name: charge, compensate: {path: /refund}}]}]`+"\n")
	aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()})+
		`edges: [{to: b, side_effects: [{name: booking, compensate: {path: /cancel}}]}]`+"\n", store(), nil)

	for i := range 3 {
		trace := fmt.Sprintf("%032x", 0xab0000+i)
		resp := send(t, aB.EgressAddr(), "b", http.MethodPost, "/book", `{"trip":"LIS-NYC"}`,
			http.Header{"Content-Type": {"application/json"}, "Traceparent": {"00-" + trace + "-b7ad6b7169203331-01"}})
		if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Baton-Dead-Letter") == "" {
			t.Fatalf("trace %d: the chain answered %d without a dead letter", i, resp.StatusCode)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+aB.AdminAddr()+"/v1/traces/"+trace+"/abandon?wait=20s", nil)
		ar, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var a compensation.Abandonment
		raw, _ := io.ReadAll(ar.Body)
		ar.Body.Close()
		if err := json.Unmarshal(raw, &a); err != nil || ar.StatusCode != http.StatusOK {
			t.Fatalf("trace %d: abandon answered %d: %s", i, ar.StatusCode, raw)
		}
		if !a.Settled || len(a.Steps) != 2 || a.Steps[0].Effect != "charge" || a.Steps[1].Effect != "booking" ||
			a.Steps[0].State != "undone" || a.Steps[1].State != "undone" {
			t.Fatalf("trace %d: %+v; want settled, the charge undone, then the booking", i, a)
		}
		c.mu.Lock()
		b.mu.Lock()
		refunds, cancels := append([]int64(nil), c.undoneAt...), append([]int64(nil), b.undoneAt...)
		b.mu.Unlock()
		c.mu.Unlock()
		if len(refunds) != i+1 || len(cancels) != i+1 {
			t.Fatalf("trace %d: %d refunds, %d cancellations; want one of each per trace", i, len(refunds), len(cancels))
		}
		if refunds[i] > cancels[i] {
			t.Fatalf("trace %d: the booking was cancelled before the charge was refunded", i)
		}
	}
}
