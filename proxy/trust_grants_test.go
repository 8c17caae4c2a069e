package proxy_test

// Grants narrowed along a chain of real Batons (trust_test.go has the
// shared helpers).

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/trust"
)

// TestTrustGrantsNarrowAlongAChain: analyst → summarizer → reviewer →
// auditor, all signed. Each agent forwards the traceparent it received, as
// agents in one trace do. The grant each agent receives is the intersection
// of what its sender received and what the sender's edge declares, and an
// agent cannot hand off beyond it.
func TestTrustGrantsNarrowAlongAChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	analystKey := newTrustID(t, dir, "analyst-1")
	summarizerKey := newTrustID(t, dir, "summarizer-1")
	reviewerKey := newTrustID(t, dir, "reviewer-1")

	agents := map[string]*seen{"summarizer": {}, "reviewer": {}, "auditor": {}}
	upstream := map[string]string{}
	for name, s := range agents {
		srv := httptest.NewServer(s.handler(200, `{"ok":true}`))
		t.Cleanup(srv.Close)
		upstream[name] = srv.URL
	}
	auditor := startBaton(t, "agent: auditor\nupstream: "+upstream["auditor"]+"\n"+
		"trust: {peers: {reviewer: ["+reviewerKey.line()+"]}}\nedges: [{from: reviewer}]\n", nil)
	reviewer := startBaton(t, "agent: reviewer\nupstream: "+upstream["reviewer"]+"\n"+reviewerKey.identity()+
		"trust: {peers: {summarizer: ["+summarizerKey.line()+"]}}\n"+
		"peers: {auditor: {url: http://"+auditor.IngressAddr()+"}}\n"+
		// reviewer's own edge declares more than reviewer received: it
		// cannot widen the grant.
		"edges: [{from: summarizer}, {to: auditor, grant: {may_handoff_to: [auditor, publisher], side_effects: [read, write]}}]\n", nil)
	// publisher is configured, with an edge, but outside every grant; it is
	// at a closed address, so a handoff that left would be 502.
	summarizer := startBaton(t, "agent: summarizer\nupstream: "+upstream["summarizer"]+"\n"+summarizerKey.identity()+
		"trust: {peers: {analyst: ["+analystKey.line()+"]}, uncorrelated: deny}\n"+
		"peers: {reviewer: {url: http://"+reviewer.IngressAddr()+"}, publisher: {url: http://"+closedAddr(t)+"}}\n"+
		"edges: [{from: analyst}, {to: reviewer, grant: {may_handoff_to: [auditor], side_effects: [read]}}, {to: publisher}]\n", nil)
	analyst := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+analystKey.identity()+
		"peers: {summarizer: {url: http://"+summarizer.IngressAddr()+"}}\n"+
		"edges: [{to: summarizer, grant: {may_handoff_to: [reviewer, auditor], side_effects: [read, write]}}]\n", nil)
	traceparent, traceID := newTraceparent(t)

	// received returns the traceparent the agent last got, checking the
	// grant that came with it.
	received := func(t *testing.T, agent string, want trust.Grant) string {
		t.Helper()
		r := agents[agent].last(t)
		enc := r.Header.Get("Baton-Grant")
		g, err := trust.DecodeGrant(enc)
		if err != nil {
			t.Fatalf("%s's Baton-Grant %q: %v", agent, enc, err)
		}
		slices.Sort(g.MayHandoffTo)
		slices.Sort(g.SideEffects)
		if !slices.Equal(g.MayHandoffTo, want.MayHandoffTo) || !slices.Equal(g.SideEffects, want.SideEffects) {
			t.Errorf("%s received grant %+v, want %+v", agent, g, want)
		}
		return r.Header.Get("Traceparent")
	}

	// The steps depend on each other (each forwards what the last
	// delivered), so they run in order.
	steps := []struct {
		name   string
		from   *baton
		peer   string
		parent func(t *testing.T) string // the traceparent the agent sends
		// forged is a Baton-Grant the agent sets itself, to widen its grant.
		forged string
		status int
		reason string
		// receiver and grant: the agent that gets the handoff and the grant
		// it must see.
		receiver string
		grant    trust.Grant
	}{
		{
			name: "analyst to summarizer", from: analyst, peer: "summarizer",
			parent: func(*testing.T) string { return traceparent }, status: 200,
			receiver: "summarizer", grant: trust.Grant{MayHandoffTo: []string{"auditor", "reviewer"}, SideEffects: []string{"read", "write"}},
		},
		{
			name: "summarizer to reviewer", from: summarizer, peer: "reviewer",
			parent: func(t *testing.T) string {
				return received(t, "summarizer", trust.Grant{MayHandoffTo: []string{"auditor", "reviewer"}, SideEffects: []string{"read", "write"}})
			},
			status: 200, receiver: "reviewer", grant: trust.Grant{MayHandoffTo: []string{"auditor"}, SideEffects: []string{"read"}},
		},
		{
			name: "reviewer to auditor", from: reviewer, peer: "auditor",
			parent: func(t *testing.T) string {
				return received(t, "reviewer", trust.Grant{MayHandoffTo: []string{"auditor"}, SideEffects: []string{"read"}})
			},
			status: 200, receiver: "auditor", grant: trust.Grant{MayHandoffTo: []string{"auditor"}, SideEffects: []string{"read"}},
		},
		{
			name: "summarizer escalates to a peer outside its grant", from: summarizer, peer: "publisher",
			parent: func(t *testing.T) string { return agents["summarizer"].last(t).Header.Get("Traceparent") },
			status: 403, reason: trust.DecisionNotGranted,
		},
		{
			name: "summarizer escalates with a Baton-Grant of its own", from: summarizer, peer: "publisher",
			parent: func(t *testing.T) string { return agents["summarizer"].last(t).Header.Get("Traceparent") },
			forged: mustEncodeGrant(t, trust.Grant{MayHandoffTo: []string{"publisher"}, SideEffects: []string{"write"}}),
			status: 403, reason: trust.DecisionNotGranted,
		},
	}
	for _, st := range steps {
		if !t.Run(st.name, func(t *testing.T) {
			hdr := http.Header{"Traceparent": {st.parent(t)}, "Content-Type": {"application/json"}}
			if st.forged != "" {
				hdr.Set("Baton-Grant", st.forged)
			}
			before := 0
			if st.receiver != "" {
				before = agents[st.receiver].count()
			}
			resp := send(t, st.from.EgressAddr(), st.peer, "POST", "/tasks", `{"task":"review"}`, hdr)
			if st.status != 200 {
				wantRefusal(t, resp, st.status, problem.PolicyDenied, st.reason)
				return
			}
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if n := agents[st.receiver].count(); n != before+1 {
				t.Fatalf("%s saw %d handoffs, want %d", st.receiver, n, before+1)
			}
			received(t, st.receiver, st.grant)
		}) {
			t.FailNow()
		}
	}

	// The receipts keep the grant as received and the key that signed it.
	rec := receipt(t, reviewer.AdminAddr(), traceID)
	if g, err := trust.DecodeGrant(rec.Grant); err != nil || !slices.Equal(g.MayHandoffTo, []string{"auditor"}) {
		t.Errorf("reviewer's receipt grant %q (%v), want {auditor}/{read}", rec.Grant, err)
	}
	if rec.SenderKeyID != summarizerKey.key.ID() {
		t.Errorf("reviewer's receipt sender_key_id %q, want %q", rec.SenderKeyID, summarizerKey.key.ID())
	}
}

func mustEncodeGrant(t *testing.T, g trust.Grant) string {
	t.Helper()
	s, err := trust.EncodeGrant(g)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTrustGrantSurvivesLaterInboundHandoffs: summarizer received a signed
// handoff granting {reviewer}/{read}. A second, unsigned handoff in the same
// trace (an edge with require_signature: false lets it in, as untrusted)
// must not widen that grant: its Baton-Grant is not authenticated by
// anything.
func TestTrustGrantSurvivesLaterInboundHandoffs(t *testing.T) {
	t.Parallel()
	analystKey := newTrustID(t, t.TempDir(), "analyst-1")

	tests := []struct {
		name  string
		grant *trust.Grant // the second handoff's Baton-Grant; nil: none
	}{
		{name: "unsigned, without a Baton-Grant"},
		{name: "unsigned, with a wider Baton-Grant", grant: &trust.Grant{MayHandoffTo: []string{"publisher"}, SideEffects: []string{"write"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got seen
			ag := httptest.NewServer(got.handler(200, `{"ok":true}`))
			t.Cleanup(ag.Close)
			// publisher is at a closed address: a handoff that left would be 502.
			summarizer := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n"+
				"trust: {peers: {analyst: ["+analystKey.line()+"]}}\n"+
				"peers: {publisher: {url: http://"+closedAddr(t)+"}}\n"+
				"edges: [{from: analyst}, {from: planner, require_signature: false}, {to: publisher, require_signature: false}]\n", nil)
			analyst := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+analystKey.identity()+
				"peers: {summarizer: {url: http://"+summarizer.IngressAddr()+"}}\n"+
				"edges: [{to: summarizer, grant: {may_handoff_to: [reviewer], side_effects: [read]}}]\n", nil)

			traceparent, traceID := newTraceparent(t)
			if resp := sendHandoff(t, analyst.EgressAddr(), "summarizer", traceparent); resp.StatusCode != 200 {
				t.Fatalf("analyst → summarizer: status %d", resp.StatusCode)
			}
			inTrace := got.last(t).Header.Get("Traceparent")

			// The second handoff, straight to the ingress, in the same trace.
			hdr := http.Header{"Baton-Agent": {"planner"}, "Baton-Hop": {"1"},
				"Traceparent": {"00-" + traceID + "-1111111111111111-01"}}
			if tc.grant != nil {
				hdr.Set("Baton-Grant", mustEncodeGrant(t, *tc.grant))
			}
			if resp := send(t, summarizer.IngressAddr(), summarizer.IngressAddr(), "POST", "/tasks", `{"task":"publish"}`, hdr); resp.StatusCode != 200 {
				t.Fatalf("planner → summarizer (unsigned): status %d", resp.StatusCode)
			}

			resp := sendHandoff(t, summarizer.EgressAddr(), "publisher", inTrace)
			wantRefusal(t, resp, http.StatusForbidden, problem.PolicyDenied, trust.DecisionNotGranted)
		})
	}
}
