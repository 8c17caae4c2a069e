package proxy_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/batonproxy/baton/approval"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/trust"
)

// signedDecision is an approve or deny (action) signed with key as agent
// (the approver the key is claimed for).
func signedDecision(t *testing.T, admin, id, action string, key *trust.Key, as string) *http.Request {
	t.Helper()
	body := []byte(`{"reason":"signed"}`)
	req, _ := http.NewRequest(http.MethodPost, "http://"+admin+"/v1/approvals/"+id+"/"+action, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Baton-Agent", as)
	req.Header.Set("Baton-Hop", "0")
	req.Header.Set("Traceparent", "00-"+strings.Repeat("ab", 16)+"-"+strings.Repeat("cd", 8)+"-01")
	if err := trust.NewSigner(key).Sign(trust.RequestMessage(req, body), time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

func do(t *testing.T, req *http.Request) (int, problemDoc) {
	t.Helper()
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p problemDoc
	json.NewDecoder(resp.Body).Decode(&p)
	return resp.StatusCode, p
}

// Approvers who sign: a signature by an approver's key decides as that
// approver, once (its nonce is spent); the agent's own identity key is the
// agent, refused; a key claimed for another approver is refused.
func TestGateSignedApprovals(t *testing.T) {
	dir := t.TempDir()
	own, _ := trust.GenerateKey("planner-1")
	pem, _ := own.PrivatePEM()
	keyFile := filepath.Join(dir, "planner.key")
	if err := os.WriteFile(keyFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	bob, _ := trust.GenerateKey("bob-1")
	ag := &countingAgent{}
	srv := httptest.NewServer(ag)
	t.Cleanup(srv.Close)
	payments := startBaton(t, "agent: payments\nupstream: "+srv.URL+"\ntrust: {peers: {planner: ['"+own.Public().String()+"']}}\n", nil)
	planner := startBaton(t, "agent: planner\nupstream: http://127.0.0.1:1\n"+
		"identity: {key_file: '"+keyFile+"'}\n"+
		"peers: {payments: {url: http://"+payments.IngressAddr()+"}}\n"+
		"approvals: {approvers: [{name: bob, keys: ['"+bob.Public().String()+"']}]}\n"+
		"edges: [{to: payments, confirm: {}}]\n", nil)
	c := &refundChain{planner: planner, payments: payments, agent: ag}
	v := held(t, c.refund(t, 1, "signed-1"))

	if st, p := do(t, signedDecision(t, planner.AdminAddr(), v.ID, "approve", own, "planner")); st != http.StatusForbidden ||
		!strings.HasSuffix(p.Type, "#self-approval") {
		t.Fatalf("the agent's own key: %d %+v", st, p)
	}
	if st, p := do(t, signedDecision(t, planner.AdminAddr(), v.ID, "approve", bob, "alice")); st != http.StatusUnauthorized ||
		!strings.HasSuffix(p.Type, "#approver-required") {
		t.Fatalf("bob's key claimed for alice: %d %+v", st, p)
	}
	good := signedDecision(t, planner.AdminAddr(), v.ID, "approve", bob, "bob")
	replay := good.Clone(t.Context())
	if st, p := do(t, good); st != http.StatusOK {
		t.Fatalf("bob's signed approval: %d %+v", st, p)
	}
	body := []byte(`{"reason":"signed"}`)
	replay.Body = io.NopCloser(bytes.NewReader(body))
	if st, p := do(t, replay); st != http.StatusUnauthorized || !strings.Contains(p.Detail, "nonce") {
		t.Fatalf("the same signed request again: %d %+v", st, p)
	}
	if rec := getRecord(t, planner.AdminAddr(), v.ID); rec.Approval.By != "bob" || ag.count() != 1 {
		t.Fatalf("decided by %q, payments ran %d times", rec.Approval.By, ag.count())
	}
}

// Each approval that starts pending is notified once to approvals.notify.
func TestGateNotifies(t *testing.T) {
	var mu sync.Mutex
	var notices []approval.ApprovalNotice
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n approval.ApprovalNotice
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			t.Errorf("notice: %v", err)
		}
		mu.Lock()
		notices = append(notices, n)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { mp.Shutdown(t.Context()) })
	c := startRefundChainWith(t, sharedStore(t), "{when: [{field: /amount, over: 100}]}", ", notify: "+hook.URL,
		func(o *proxy.Options) {
			o.MeterProvider, o.Metrics = mp, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		})
	v := held(t, c.refund(t, 500, "notify-1"))
	held(t, c.refund(t, 500, "notify-1")) // the same approval: no second notice
	w := held(t, c.refund(t, 700, "notify-2"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(notices)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // a third notice, if one were sent, would land by now
	mu.Lock()
	got := append([]approval.ApprovalNotice(nil), notices...)
	mu.Unlock()
	if len(got) != 2 || got[0].ID != v.ID || got[1].ID != w.ID || got[0].Type != "baton.approval.pending" ||
		got[0].Edge != "planner→payments" || got[0].Gate != "rule 1" || got[0].Target != "/refunds" {
		t.Fatalf("notices %+v, want one for each of %s and %s", got, v.ID, w.ID)
	}

	if st, _ := decide(t, c.planner.AdminAddr(), v.ID, "approve", aliceToken, ""); st != http.StatusOK {
		t.Fatal(st)
	}
	if st, _ := decide(t, c.planner.AdminAddr(), w.ID, "deny", aliceToken, "no"); st != http.StatusOK {
		t.Fatal(st)
	}
	m := scrapeMetrics(t, c.planner.AdminAddr())
	for _, want := range []struct {
		name   string
		labels map[string]string
		v      float64
	}{
		{"baton_approvals_held_total", map[string]string{"to": "payments", "gate": "rule 1"}, 2},
		{"baton_approvals_decided_total", map[string]string{"decision": "approved"}, 1},
		{"baton_approvals_decided_total", map[string]string{"decision": "denied"}, 1},
		{"baton_approvals_age_seconds_count", map[string]string{"decision": "denied"}, 1},
		{"baton_approvals_pending", map[string]string{"agent": "planner"}, 0},
	} {
		if got, ok := m.value(want.name, want.labels); !ok || got != want.v {
			t.Errorf("%s%v = %v (found %v), want %v", want.name, want.labels, got, ok, want.v)
		}
	}
	documented(t, "baton_approvals_held_total", "baton_approvals_decided_total", "baton_approvals_age_seconds",
		"baton_approvals_pending")
}

// An approver reads what she decides on, never the agent's credentials.
func TestGateApproverReadsNoCredentials(t *testing.T) {
	c := startRefundChain(t, sharedStore(t), "")
	h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {`"cred-1"`}, "Authorization": {"Bearer agent-secret"}}
	v := held(t, send(t, c.planner.EgressAddr(), "payments", http.MethodPost, "/refunds", `{"amount":5000}`, h))
	var asAlice, asAdmin struct {
		Request struct{ Header http.Header } `json:"request"`
	}
	adminGetAuth(t, c.planner.AdminAddr(), "/v1/approvals/"+v.ID, aliceToken, &asAlice)
	adminGetAuth(t, c.planner.AdminAddr(), "/v1/approvals/"+v.ID, adminTok, &asAdmin)
	if got := asAlice.Request.Header.Get("Authorization"); got != "[redacted]" {
		t.Fatalf("alice reads Authorization %q", got)
	}
	if got := asAdmin.Request.Header.Get("Authorization"); got != "Bearer agent-secret" {
		t.Fatalf("the admin reads Authorization %q (the checkpoint, as the records API shows it)", got)
	}
}
