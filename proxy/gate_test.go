package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/approval"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
)

const (
	aliceToken = "alice-token-0123456789"
	adminTok   = "admin-token-0123456789"
)

// refundChain is a planner agent's Baton handing off to payments, whose
// Baton sits in front of a payments agent that counts every refund it makes
// by key. The edge planner→payments holds refunds over 1000 for approval;
// alice approves with her token. Both Batons share one store.
type refundChain struct {
	planner, payments *baton
	agent             *countingAgent
	store             func() state.Store
	plannerYAML       string
	agentURL          string // the payments agent
}

// countingAgent is the payments agent: it counts refunds by key and
// answers with the count.
type countingAgent struct {
	mu    sync.Mutex
	byKey map[string]int
	keys  []string
	total int
}

func (a *countingAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	a.mu.Lock()
	if a.byKey == nil {
		a.byKey = map[string]int{}
	}
	a.byKey[key]++
	a.keys = append(a.keys, key)
	a.total++
	n := a.total
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"refunded":%s,"refund_no":%d}`, body, n)
}

func (a *countingAgent) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total
}

func (a *countingAgent) perKey() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for k, v := range a.byKey {
		out[k] = v
	}
	return out
}

func startRefundChain(t *testing.T, newStore func() state.Store, confirm string) *refundChain {
	t.Helper()
	return startRefundChainWith(t, newStore, confirm, "", nil)
}

// startRefundChainWith is startRefundChain with approvalsExtra added to the
// planner's approvals block and its Options adjusted by opts.
func startRefundChainWith(t *testing.T, newStore func() state.Store, confirm, approvalsExtra string, opts func(*proxy.Options)) *refundChain {
	t.Helper()
	t.Setenv("ALICE_TOKEN", aliceToken)
	ag := &countingAgent{}
	srv := httptest.NewServer(ag)
	t.Cleanup(srv.Close)
	payments := startBaton(t, "agent: payments\nupstream: "+srv.URL+"\nedges: [{from: planner}]\n", newStore())
	if confirm == "" {
		confirm = "{when: [{name: refund over 1000, methods: [POST], target: /refunds, field: /amount, over: 1000}]}"
	}
	y := "agent: planner\nupstream: http://127.0.0.1:1\nadmin_token: " + adminTok + "\n" +
		"peers: {payments: {url: http://" + payments.IngressAddr() + "}}\n" +
		"approvals: {approvers: [{name: alice, token_env: ALICE_TOKEN}]" + approvalsExtra + "}\n" +
		"edges: [{to: payments, confirm: " + confirm + "}]\n"
	planner := startBatonWith(t, y, newStore(), func(o *proxy.Options) {
		o.Env = envFunc
		if opts != nil {
			opts(o)
		}
	})
	return &refundChain{planner: planner, payments: payments, agent: ag, store: newStore, plannerYAML: y, agentURL: srv.URL}
}

func envFunc(k string) string {
	if k == "ALICE_TOKEN" {
		return aliceToken
	}
	return ""
}

// refund is the planner agent's call: POST /refunds with its key.
func (c *refundChain) refund(t *testing.T, amount int, key string) *http.Response {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Idempotency-Key", `"`+key+`"`)
	}
	return send(t, c.planner.EgressAddr(), "payments", http.MethodPost, "/refunds", fmt.Sprintf(`{"amount":%d}`, amount), h)
}

// decide posts an approve or deny to the planner's admin API as token.
func decide(t *testing.T, admin, id, action, token, reason string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"reason": reason})
	req, _ := http.NewRequest(http.MethodPost, "http://"+admin+"/v1/approvals/"+id+"/"+action, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc
}

// held reads a 202 answer: the approval view and its Location.
func held(t *testing.T, resp *http.Response) approval.ApprovalView {
	t.Helper()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, want 202 (held); body %s", resp.StatusCode, b)
	}
	var v approval.ApprovalView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.State != "held" || v.ID == "" || resp.Header.Get("Location") != v.Location ||
		!strings.HasSuffix(v.Location, approval.PathPrefix+v.ID) {
		t.Fatalf("held answer %+v, Location %q", v, resp.Header.Get("Location"))
	}
	return v
}

func poll(t *testing.T, location string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(location)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func pending(t *testing.T, admin string) approval.PendingPage {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+admin+"/v1/approvals", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p approval.PendingPage
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&p) != nil {
		t.Fatalf("GET /v1/approvals: %d", resp.StatusCode)
	}
	return p
}

func TestGateHoldsUntilApproved(t *testing.T) {
	c := startRefundChain(t, sharedStore(t), "")

	// Under the threshold: not gated.
	if resp := c.refund(t, 50, "small-1"); resp.StatusCode != http.StatusOK {
		t.Fatalf("refund of 50: %d", resp.StatusCode)
	}
	v := held(t, c.refund(t, 5000, "big-1"))
	if v.Gate != "refund over 1000" || v.Edge != "planner→payments" || c.agent.count() != 1 {
		t.Fatalf("held %+v; payments ran %d times, want once (the small refund)", v, c.agent.count())
	}
	// The agent polls: still held.
	if resp, b := poll(t, v.Location); resp.StatusCode != http.StatusAccepted || !strings.Contains(string(b), `"state":"held"`) {
		t.Fatalf("poll while held: %d %s", resp.StatusCode, b)
	}
	// The agent's retry of the same handoff meets the same approval.
	if again := held(t, c.refund(t, 5000, "big-1")); again.ID != v.ID {
		t.Fatalf("the re-sent handoff opened approval %s, want %s", again.ID, v.ID)
	}
	if p := pending(t, c.planner.AdminAddr()); p.Total != 1 || p.Records[0].ID != v.ID {
		t.Fatalf("pending %+v, want just %s", p, v.ID)
	}

	// The agent cannot decide its own handoff, on its listener...
	resp, err := http.Post(v.Location+"/approve", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if p := readProblem(t, resp); p.Status != http.StatusForbidden || !strings.HasSuffix(p.Type, "#self-approval") {
		t.Fatalf("the agent approving its own handoff: %+v", p)
	}
	resp.Body.Close()
	// ...nor without an identity on the admin API.
	if st, doc := decide(t, c.planner.AdminAddr(), v.ID, "approve", "", ""); st != http.StatusUnauthorized ||
		!strings.HasSuffix(doc["type"].(string), "#approver-required") {
		t.Fatalf("approve without identity: %d %v", st, doc)
	}
	if c.agent.count() != 1 {
		t.Fatal("a refused decision sent the handoff")
	}

	// alice approves: the checkpoint goes with its original key, once.
	st, doc := decide(t, c.planner.AdminAddr(), v.ID, "approve", aliceToken, "checked the order")
	if st != http.StatusOK || doc["status"] != float64(200) {
		t.Fatalf("approve: %d %v", st, doc)
	}
	if got := c.agent.perKey()[`"big-1"`]; got != 1 || c.agent.count() != 2 {
		t.Fatalf("payments ran the approved refund %d times (total %d), want once", got, c.agent.count())
	}
	// The agent's poll now gets payments' answer.
	resp2, b := poll(t, v.Location)
	if resp2.StatusCode != http.StatusOK || !strings.Contains(string(b), `"refunded":{"amount":5000}`) ||
		resp2.Header.Get("Idempotency-Key") != `"big-1"` {
		t.Fatalf("poll after approval: %d %s %v", resp2.StatusCode, b, resp2.Header)
	}
	// A second decision is refused, naming the first.
	if st, doc := decide(t, c.planner.AdminAddr(), v.ID, "deny", adminTok, "too late"); st != http.StatusConflict ||
		doc["decided_by"] != "alice" {
		t.Fatalf("second decision: %d %v", st, doc)
	}
	// The agent re-sends the approved handoff: it passes, and payments'
	// window answers it without refunding again.
	if resp := c.refund(t, 5000, "big-1"); resp.StatusCode != http.StatusOK || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("re-send after approval: %d %v", resp.StatusCode, resp.Header)
	}
	if got := c.agent.perKey()[`"big-1"`]; got != 1 {
		t.Fatalf("payments refunded big-1 %d times", got)
	}
	if p := pending(t, c.planner.AdminAddr()); p.Total != 0 {
		t.Fatalf("still pending after the decision: %+v", p)
	}

	// The record says who decided, in the trace's hash chain.
	rec := getRecord(t, c.planner.AdminAddr(), v.ID)
	if rec.State != record.Delivered || rec.Approval == nil || rec.Approval.Decision != "approved" ||
		rec.Approval.By != "alice" || rec.Approval.Reason != "checked the order" || rec.Approval.At == nil {
		t.Fatalf("record after approval: %+v approval %+v", rec, rec.Approval)
	}
	var tv records.TraceView
	if st := adminGetAuth(t, c.planner.AdminAddr(), "/v1/traces/"+rec.TraceID, adminTok, &tv); st != http.StatusOK {
		t.Fatalf("trace: %d", st)
	}
	states := map[string]bool{}
	for _, e := range tv.Entries {
		for _, s := range []string{"held", "approved", "delivered"} {
			if strings.Contains(e, `"state":"`+s+`"`) && strings.Contains(e, v.ID) {
				states[s] = true
			}
		}
	}
	if len(states) != 3 {
		t.Fatalf("the chain holds states %v of %s, want held, approved and delivered", states, v.ID)
	}
}

func getRecord(t *testing.T, admin, id string) *record.Record {
	t.Helper()
	var rec record.Record
	if st := adminGetAuth(t, admin, "/v1/records/"+id, adminTok, &rec); st != http.StatusOK {
		t.Fatalf("GET record %s: %d", id, st)
	}
	return &rec
}

func adminGetAuth(t *testing.T, admin, path, token string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		json.NewDecoder(resp.Body).Decode(v)
	}
	return resp.StatusCode
}

func TestGateDenied(t *testing.T) {
	c := startRefundChain(t, sharedStore(t), "")
	v := held(t, c.refund(t, 9000, "big-2"))
	if st, doc := decide(t, c.planner.AdminAddr(), v.ID, "deny", aliceToken, ""); st != http.StatusBadRequest {
		t.Fatalf("deny without a reason: %d %v", st, doc)
	}
	if st, doc := decide(t, c.planner.AdminAddr(), v.ID, "deny", aliceToken, "customer already refunded"); st != http.StatusOK {
		t.Fatalf("deny: %d %v", st, doc)
	}
	for _, resp := range []*http.Response{mustGet(t, v.Location), c.refund(t, 9000, "big-2")} {
		p := readProblem(t, resp)
		if p.Status != http.StatusForbidden || !strings.HasSuffix(p.Type, "#approval-denied") ||
			!strings.Contains(p.Detail, "customer already refunded") || !strings.Contains(p.Detail, "alice") {
			t.Fatalf("after denial: %+v", p)
		}
	}
	if c.agent.count() != 0 {
		t.Fatalf("payments ran %d times after a denial", c.agent.count())
	}
	if rec := getRecord(t, c.planner.AdminAddr(), v.ID); rec.State != record.Denied || rec.Approval.By != "alice" {
		t.Fatalf("denied record %+v", rec)
	}
}

func mustGet(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestGateExpires(t *testing.T) {
	c := startRefundChain(t, sharedStore(t), "{expires: 1s}")
	v := held(t, c.refund(t, 10, "exp-1"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := getRecord(t, c.planner.AdminAddr(), v.ID)
		if rec.State == record.Expired {
			if rec.Approval.Decision != "expired" || rec.Approval.By != "baton" {
				t.Fatalf("expired record %+v", rec.Approval)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s 10s after a 1s expiry", rec.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if p := readProblem(t, mustGet(t, v.Location)); p.Status != http.StatusGone || !strings.HasSuffix(p.Type, "#approval-expired") {
		t.Fatalf("poll after expiry: %+v", p)
	}
	// Sending it again asks again: a new approval.
	if again := held(t, c.refund(t, 10, "exp-1")); again.ID == v.ID {
		t.Fatal("a re-send after expiry met the expired approval")
	}
	if st, _ := decide(t, c.planner.AdminAddr(), v.ID, "approve", aliceToken, ""); st != http.StatusConflict {
		t.Fatalf("approving an expired approval: %d", st)
	}
	if c.agent.count() != 0 {
		t.Fatal("an expired handoff was sent")
	}
}

func TestGateWaitsForDecision(t *testing.T) {
	c := startRefundChain(t, sharedStore(t), "{wait: 5s}")
	done := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+c.planner.EgressAddr()+"/refunds", strings.NewReader(`{"amount":7}`))
		req.Host = "payments"
		req.Header.Set("Idempotency-Key", `"wait-1"`)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	var id string
	for deadline := time.Now().Add(5 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if p := pending(t, c.planner.AdminAddr()); p.Total == 1 {
			id = p.Records[0].ID
		}
	}
	if id == "" {
		t.Fatal("nothing held")
	}
	if st, doc := decide(t, c.planner.AdminAddr(), id, "approve", aliceToken, ""); st != http.StatusOK {
		t.Fatalf("approve: %d %v", st, doc)
	}
	resp := <-done
	if resp == nil {
		t.FailNow()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"refunded":{"amount":7}`) {
		t.Fatalf("the waiting call got %d %s, want payments' answer", resp.StatusCode, b)
	}
	if c.agent.count() != 1 {
		t.Fatalf("payments ran %d times", c.agent.count())
	}
}

// A Baton restarted while a handoff is held loses nothing: the new process
// lists it, decides it and delivers it, and the agent's poll finds it.
func TestGateSurvivesRestart(t *testing.T) {
	newStore := sharedStore(t)
	c := startRefundChain(t, newStore, "")
	v := held(t, c.refund(t, 2500, "restart-1"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.planner.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	again := startBatonWith(t, c.plannerYAML, newStore(), func(o *proxy.Options) { o.Env = envFunc })
	if p := pending(t, again.AdminAddr()); p.Total != 1 || p.Records[0].ID != v.ID {
		t.Fatalf("after restart pending = %+v", p)
	}
	if st, doc := decide(t, again.AdminAddr(), v.ID, "approve", aliceToken, ""); st != http.StatusOK || doc["status"] != float64(200) {
		t.Fatalf("approve after restart: %d %v", st, doc)
	}
	loc := "http://" + again.EgressAddr() + approval.PathPrefix + v.ID
	if resp, b := poll(t, loc); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"amount":2500`) {
		t.Fatalf("poll after restart: %d %s", resp.StatusCode, b)
	}
	if got := c.agent.perKey()[`"restart-1"`]; got != 1 {
		t.Fatalf("payments ran restart-1 %d times", got)
	}
}

// Two approvers deciding at once: one decision wins, the handoff goes once.
func TestGateConcurrentDecisions(t *testing.T) {
	c := startRefundChain(t, sharedStore(t), "")
	v := held(t, c.refund(t, 3000, "race-1"))
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := aliceToken
			if i%2 == 1 {
				tok = adminTok
			}
			codes[i], _ = decide(t, c.planner.AdminAddr(), v.ID, "approve", tok, "")
		}()
	}
	wg.Wait()
	ok := 0
	for _, st := range codes {
		switch st {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
		default:
			t.Fatalf("decision answered %d", st)
		}
	}
	if ok != 1 || c.agent.count() != 1 {
		t.Fatalf("%d decisions won, payments ran %d times; want 1 and 1", ok, c.agent.count())
	}
}

// A call that waits for a decision that does not come is answered 202 when
// its wait is over.
func TestGateWaitEnds(t *testing.T) {
	c := startRefundChain(t, sharedStore(t), "{wait: 1s}")
	start := time.Now()
	v := held(t, c.refund(t, 3, "wait-ends"))
	if d := time.Since(start); d < time.Second || d > 4*time.Second {
		t.Fatalf("answered 202 after %v, want about the 1s wait", d)
	}
	if p := pending(t, c.planner.AdminAddr()); p.Total != 1 || p.Records[0].ID != v.ID {
		t.Fatalf("pending %+v", p)
	}
}

// An approval covers the handoff approved, never another request that
// reuses its key: a different body with the same key is held anew.
func TestGateApprovalCoversOneRequest(t *testing.T) {
	c := startRefundChain(t, sharedStore(t), "")
	v := held(t, c.refund(t, 5000, "reused"))
	if st, doc := decide(t, c.planner.AdminAddr(), v.ID, "approve", aliceToken, ""); st != http.StatusOK {
		t.Fatalf("approve: %d %v", st, doc)
	}
	other := held(t, c.refund(t, 999999, "reused"))
	if other.ID == v.ID {
		t.Fatal("a different body with an approved key met the approval")
	}
	if got := c.agent.perKey()[`"reused"`]; got != 1 {
		t.Fatalf("payments ran the key %d times, want once (the approved body)", got)
	}
}

// An approved handoff that was dead-lettered and then replayed: the
// agent's poll gets the replay's answer, not the failure.
func TestGateApprovedThenReplayed(t *testing.T) {
	c := startRefundChain(t, sharedStore(t), "")
	v := held(t, c.refund(t, 4000, "approved-dead"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.payments.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st, doc := decide(t, c.planner.AdminAddr(), v.ID, "approve", aliceToken, ""); st != http.StatusOK || doc["error"] == nil {
		t.Fatalf("approve with payments down: %d %v", st, doc)
	}
	if resp, b := poll(t, v.Location); resp.StatusCode < 500 || resp.Header.Get("Baton-Dead-Letter") != v.ID {
		t.Fatalf("poll of the dead-lettered approval: %d %s %v", resp.StatusCode, b, resp.Header)
	}
	// payments' Baton comes back on the same address; the dead letter is
	// replayed.
	startBaton(t, "agent: payments\nupstream: "+c.agentURL+"\nlisten: {egress: 127.0.0.1:0, ingress: "+
		c.payments.IngressAddr()+", admin: 127.0.0.1:0}\nedges: [{from: planner}]\n", c.store())
	req, _ := http.NewRequest(http.MethodPost, "http://"+c.planner.AdminAddr()+"/v1/deadletters/"+v.ID+"/replay", nil)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("replay: %d", resp.StatusCode)
	}
	if resp, b := poll(t, v.Location); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"amount":4000`) {
		t.Fatalf("poll after the replay: %d %s", resp.StatusCode, b)
	}
	if got := c.agent.perKey()[`"approved-dead"`]; got != 1 {
		t.Fatalf("payments ran it %d times", got)
	}
}
