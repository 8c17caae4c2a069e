package proxy_test

// Edge policy, uncorrelated handoffs and the admin token, through real
// Batons (trust_test.go has the shared helpers).

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/trust"
)

// TestTrustEdgePolicy: once edges are configured, an edge that is not
// listed is refused at whichever end checks it, and an unsigned handoff an
// edge lets through is taken as untrusted.
func TestTrustEdgePolicy(t *testing.T) {
	t.Parallel()
	analystKey := newTrustID(t, t.TempDir(), "analyst-1")

	tests := []struct {
		name string
		// The sender, analyst: signs or not, and its edges.
		signs       bool
		senderEdges string
		// The receiver, summarizer: a bundle listing analyst or not, and
		// its edges.
		bundle        bool
		receiverEdges string
		host          string // the peer the agent hands off to
		status        int
		class         problem.Class
		reason        string
		posture       string // in the receipt, when delivered
	}{
		{
			name: "outbound to a peer without a to edge", senderEdges: "[{to: summarizer}]", host: "reviewer",
			status: 403, class: problem.PolicyDenied, reason: trust.DecisionNoEdge,
		},
		{
			name: "outbound unsigned on an edge requiring a signature", senderEdges: "[{to: summarizer, require_signature: true}]",
			host: "summarizer", status: 403, class: problem.PolicyDenied, reason: trust.DecisionUnsigned,
		},
		{
			name: "inbound from a sender without a from edge", receiverEdges: "[{from: reviewer}]", host: "summarizer",
			status: 403, class: problem.PolicyDenied, reason: trust.DecisionNoEdge,
		},
		{
			name: "inbound unsigned where the bundle requires a signature", bundle: true, receiverEdges: "[{from: analyst}]",
			host: "summarizer", status: 401, class: problem.BadSignature, reason: trust.ReasonMissing,
		},
		{
			name: "inbound unsigned on require_signature false", bundle: true,
			receiverEdges: "[{from: analyst, require_signature: false, posture: trusted}]", host: "summarizer",
			status: 200, posture: "posture=untrusted",
		},
		{
			name: "inbound signed on a trusted edge", signs: true, bundle: true,
			receiverEdges: "[{from: analyst, posture: trusted}]", host: "summarizer",
			status: 200, posture: "posture=trusted",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got seen
			ag := httptest.NewServer(got.handler(200, `{"ok":true}`))
			t.Cleanup(ag.Close)
			recv := "agent: summarizer\nupstream: " + ag.URL + "\n"
			if tc.bundle {
				recv += "trust: {peers: {analyst: [" + analystKey.line() + "]}}\n"
			}
			if tc.receiverEdges != "" {
				recv += "edges: " + tc.receiverEdges + "\n"
			}
			b := startBaton(t, recv, nil)
			// reviewer is a configured peer at a closed address: a handoff
			// that left would be 502, not 403.
			send := "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://" + b.IngressAddr() +
				"}, reviewer: {url: http://" + closedAddr(t) + "}}\n"
			if tc.signs {
				send += analystKey.identity()
			}
			if tc.senderEdges != "" {
				send += "edges: " + tc.senderEdges + "\n"
			}
			a := startBaton(t, send, nil)

			traceparent, traceID := newTraceparent(t)
			resp := sendHandoff(t, a.EgressAddr(), tc.host, traceparent)
			if tc.status != 200 {
				wantRefusal(t, resp, tc.status, tc.class, tc.reason)
				if n := got.count(); n != 0 {
					t.Errorf("the agent saw %d handoffs, want none", n)
				}
				return
			}
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if rec := receipt(t, b.AdminAddr(), traceID); !slices.Contains(rec.Trust, tc.posture) {
				t.Errorf("receipt trust %q, want %s", rec.Trust, tc.posture)
			}
		})
	}
}

// sendHandoff is an agent's POST to peer through egress, in the trace of
// traceparent ("" for none).
func sendHandoff(t *testing.T, egress, peer, traceparent string) *http.Response {
	t.Helper()
	hdr := http.Header{"Content-Type": {"application/json"}}
	if traceparent != "" {
		hdr.Set("Traceparent", traceparent)
	}
	return send(t, egress, peer, "POST", "/tasks", `{"task":"summarise"}`, hdr)
}

// TestTrustUncorrelated: summarizer's agent hands off to reviewer. Only a
// traceparent of a handoff summarizer's Baton delivered ties the handoff to
// a trace; with trust.uncorrelated: deny any other is refused before it
// leaves, with allow it passes and is recorded as uncorrelated.
func TestTrustUncorrelated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		uncorrelated string
		parent       string // "none", "unseen" or "delivered": the traceparent the agent sends
		status       int
	}{
		{name: "deny without a traceparent", uncorrelated: "deny", parent: "none", status: 403},
		{name: "deny with a traceparent Baton never saw", uncorrelated: "deny", parent: "unseen", status: 403},
		{name: "deny with the traceparent of a delivered handoff", uncorrelated: "deny", parent: "delivered", status: 200},
		{name: "allow without a traceparent", uncorrelated: "allow", parent: "none", status: 200},
		{name: "default (allow) with a traceparent Baton never saw", parent: "unseen", status: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var atSummarizer, atReviewer seen
			sag := httptest.NewServer(atSummarizer.handler(200, `{"ok":true}`))
			t.Cleanup(sag.Close)
			rag := httptest.NewServer(atReviewer.handler(200, `{"ok":true}`))
			t.Cleanup(rag.Close)
			reviewer := startBaton(t, "agent: reviewer\nupstream: "+rag.URL+"\n", nil)
			cfg := "agent: summarizer\nupstream: " + sag.URL + "\npeers: {reviewer: {url: http://" + reviewer.IngressAddr() + "}}\n"
			if tc.uncorrelated != "" {
				cfg += "trust: {uncorrelated: " + tc.uncorrelated + "}\n"
			}
			summarizer := startBaton(t, cfg, nil)

			parent := ""
			switch tc.parent {
			case "unseen":
				parent, _ = newTraceparent(t)
			case "delivered":
				analyst := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
					summarizer.IngressAddr()+"}}\n", nil)
				first, _ := newTraceparent(t)
				if resp := sendHandoff(t, analyst.EgressAddr(), "summarizer", first); resp.StatusCode != 200 {
					t.Fatalf("analyst → summarizer: status %d", resp.StatusCode)
				}
				parent = atSummarizer.last(t).Header.Get("Traceparent")
			}
			resp := sendHandoff(t, summarizer.EgressAddr(), "reviewer", parent)
			if tc.status != 200 {
				wantRefusal(t, resp, tc.status, problem.PolicyDenied, "uncorrelated")
				if n := atReviewer.count(); n != 0 {
					t.Errorf("reviewer's agent saw %d handoffs, want none", n)
				}
				return
			}
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			// The delegation record says whether Baton could tie it to a trace.
			m := traceparentRE.FindStringSubmatch(atReviewer.last(t).Header.Get("Traceparent"))
			if m == nil {
				t.Fatal("reviewer's agent got no traceparent")
			}
			v := waitTrace(t, summarizer.AdminAddr(), m[1], func(v records.TraceView) bool {
				return slices.ContainsFunc(v.Records, func(r record.Record) bool {
					return r.Side == record.Egress && r.State == record.Delivered
				})
			})
			i := slices.IndexFunc(v.Records, func(r record.Record) bool { return r.Side == record.Egress })
			if got, want := slices.Contains(v.Records[i].Trust, "uncorrelated"), tc.parent != "delivered"; got != want {
				t.Errorf("delegation record trust %q: uncorrelated %v, want %v", v.Records[i].Trust, got, want)
			}
		})
	}
}

// TestTrustAdminToken: with admin_token set the records API needs the
// bearer token; the health probes stay open.
func TestTrustAdminToken(t *testing.T) {
	t.Parallel()
	const token = "s3cret-admin-token"
	var got seen
	ag := httptest.NewServer(got.handler(200, `{"ok":true}`))
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\nadmin_token: "+token+"\n", nil)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		b.IngressAddr()+"}}\n", nil)
	traceparent, traceID := newTraceparent(t)
	if resp := sendHandoff(t, a.EgressAddr(), "summarizer", traceparent); resp.StatusCode != 200 {
		t.Fatalf("handoff: status %d", resp.StatusCode)
	}
	// The receipt is written off the request path: wait for it, with the token.
	for deadline := time.Now().Add(5 * time.Second); ; {
		resp, _ := adminGetAs(t, b, "/v1/traces/"+traceID, "Bearer "+token)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the receipt was never written")
		}
		time.Sleep(10 * time.Millisecond)
	}
	unknown, _ := newTraceparent(t)
	unknownID := unknown[3:35]

	tests := []struct {
		name   string
		path   string
		auth   string
		status int
		class  problem.Class // for a problem answer
	}{
		{name: "trace without a token", path: "/v1/traces/" + traceID, status: 401, class: problem.Unauthorized},
		{name: "trace with a wrong token", path: "/v1/traces/" + traceID, auth: "Bearer wrong", status: 401, class: problem.Unauthorized},
		{name: "trace with the token but no scheme", path: "/v1/traces/" + traceID, auth: token, status: 401, class: problem.Unauthorized},
		{name: "dead letters without a token", path: "/v1/deadletters", status: 401, class: problem.Unauthorized},
		{name: "trace with the token", path: "/v1/traces/" + traceID, auth: "Bearer " + token, status: 200},
		{name: "unknown trace with the token", path: "/v1/traces/" + unknownID, auth: "Bearer " + token, status: 404, class: problem.NotFound},
		{name: "healthz without a token", path: "/healthz", status: 200},
		{name: "readyz without a token", path: "/readyz", status: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, _ := adminGetAs(t, b, tc.path, tc.auth)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.class != "" {
				if p := readTrustProblem(t, resp); p.Type != tc.class.Type() {
					t.Errorf("type %q, want %q", p.Type, tc.class.Type())
				}
			}
			if tc.status == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q, want a Bearer challenge", resp.Header.Get("WWW-Authenticate"))
			}
			if tc.status == 200 && strings.HasPrefix(tc.path, "/v1/traces/") {
				var v records.TraceView
				if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.TraceID != traceID || len(v.Records) == 0 {
					t.Errorf("trace view %+v (%v)", v, err)
				}
			}
		})
	}
}
