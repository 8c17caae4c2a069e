package trust_test

import (
	"strings"
	"testing"

	"github.com/batonproxy/baton/trust"
)

func TestPolicy(t *testing.T) {
	t.Parallel()
	p, err := trust.NewPolicy(
		[]trust.EdgeRule{
			{Peer: "summarizer", Posture: trust.Trusted, RequireSignature: true},
			{Peer: "search"}, // posture defaults to evaluate
		},
		[]trust.EdgeRule{
			{Peer: "planner", Posture: trust.Trusted, RequireSignature: true},
			{Peer: "scraper", Posture: trust.Evaluate}, // signature optional (a migration)
			{Peer: "web-agent", Posture: trust.Untrusted, RequireSignature: true},
		},
	)
	if err != nil {
		t.Fatal(err)
	}
	grant := &trust.Grant{MayHandoffTo: []string{"search"}, SideEffects: []string{}}
	tests := []struct {
		name    string
		inbound bool
		h       trust.Handoff
		want    trust.Decision // Detail is checked only for being set on a denial
	}{
		{"out: configured, signed", false, trust.Handoff{Peer: "summarizer", Signed: true},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowed, Posture: trust.Trusted}},
		{"out: default posture", false, trust.Handoff{Peer: "search"},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowed, Posture: trust.Evaluate}},
		{"out: no edge", false, trust.Handoff{Peer: "mailer", Signed: true},
			trust.Decision{Reason: trust.DecisionNoEdge}},
		{"out: inbound-only peer", false, trust.Handoff{Peer: "planner", Signed: true},
			trust.Decision{Reason: trust.DecisionNoEdge}},
		{"out: no key for a signed edge", false, trust.Handoff{Peer: "summarizer"},
			trust.Decision{Reason: trust.DecisionUnsigned}},
		{"out: within the grant", false, trust.Handoff{Peer: "search", Grant: grant},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowed, Posture: trust.Evaluate}},
		{"out: configured but outside the grant", false, trust.Handoff{Peer: "summarizer", Signed: true, Grant: grant},
			trust.Decision{Reason: trust.DecisionNotGranted}},
		{"out: empty grant", false, trust.Handoff{Peer: "search", Grant: &trust.Grant{}},
			trust.Decision{Reason: trust.DecisionNotGranted}},
		{"out: granted but not configured", false, trust.Handoff{Peer: "mailer", Grant: &trust.Grant{MayHandoffTo: []string{"mailer"}}},
			trust.Decision{Reason: trust.DecisionNoEdge}},

		{"in: signed, trusted edge", true, trust.Handoff{Peer: "planner", Signed: true},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowed, Posture: trust.Trusted}},
		{"in: unsigned on a signed edge", true, trust.Handoff{Peer: "planner"},
			trust.Decision{Reason: trust.DecisionUnsigned}},
		{"in: unsigned where allowed: lowered to untrusted", true, trust.Handoff{Peer: "scraper"},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowedUnsigned, Posture: trust.Untrusted}},
		{"in: signed, evaluate edge", true, trust.Handoff{Peer: "scraper", Signed: true},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowed, Posture: trust.Evaluate}},
		{"in: signed, untrusted edge", true, trust.Handoff{Peer: "web-agent", Signed: true},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowed, Posture: trust.Untrusted}},
		{"in: no edge", true, trust.Handoff{Peer: "summarizer", Signed: true},
			trust.Decision{Reason: trust.DecisionNoEdge}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got trust.Decision
			if tc.inbound {
				got = p.Inbound(tc.h)
			} else {
				got = p.Outbound(tc.h)
			}
			if got.Allow != tc.want.Allow || got.Reason != tc.want.Reason || got.Posture != tc.want.Posture {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if !got.Allow && got.Detail == "" {
				t.Error("a denial without detail")
			}
		})
	}
}

func TestNewPolicyRefuses(t *testing.T) {
	t.Parallel()
	_, err := trust.NewPolicy(
		[]trust.EdgeRule{{Peer: "a"}, {Peer: "a"}, {Peer: ""}},
		[]trust.EdgeRule{{Peer: "b", Posture: "paranoid"}},
	)
	for _, want := range []string{`outbound[1].peer: "a" has an outbound edge already`, "outbound[2].peer: must be set", `inbound[0].posture: must be trusted, evaluate or untrusted, got "paranoid"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewPolicy = %v, want an error with %q", err, want)
		}
	}
	// The same peer at both ends is two edges, not a duplicate.
	if _, err := trust.NewPolicy([]trust.EdgeRule{{Peer: "a"}}, []trust.EdgeRule{{Peer: "a"}}); err != nil {
		t.Error(err)
	}
}

// TestPolicyCallers: a callers edge admits only the caller its rule named,
// with its configured posture, else untrusted when anonymous and evaluate
// when a credential checked out; no other edge admits a caller.
func TestPolicyCallers(t *testing.T) {
	t.Parallel()
	p, err := trust.NewPolicy(nil, []trust.EdgeRule{
		{Peer: "web", Callers: true},
		{Peer: "cron", Callers: true, Posture: trust.Trusted},
		{Peer: "planner", RequireSignature: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	bearer := &trust.Caller{Edge: "web", Via: trust.CallerBearer}
	anon := &trust.Caller{Edge: "web", Via: trust.CallerAnonymous}
	tests := []struct {
		name string
		h    trust.Handoff
		want trust.Decision
	}{
		{"bearer caller: default posture", trust.Handoff{Peer: "web", Caller: bearer},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowed, Posture: trust.Evaluate}},
		{"anonymous caller: untrusted", trust.Handoff{Peer: "web", Caller: anon},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowed, Posture: trust.Untrusted}},
		{"network caller: untrusted", trust.Handoff{Peer: "web", Caller: &trust.Caller{Edge: "web", Via: trust.CallerNetwork, Subject: "127.0.0.1"}},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowed, Posture: trust.Untrusted}},
		{"anonymous caller: configured posture wins", trust.Handoff{Peer: "cron", Caller: &trust.Caller{Edge: "cron", Via: trust.CallerAnonymous}},
			trust.Decision{Allow: true, Reason: trust.DecisionAllowed, Posture: trust.Trusted}},
		{"a Baton claiming a callers edge's name", trust.Handoff{Peer: "web"},
			trust.Decision{Reason: trust.DecisionNoEdge}},
		{"a signed Baton claiming a callers edge's name", trust.Handoff{Peer: "web", Signed: true},
			trust.Decision{Reason: trust.DecisionNoEdge}},
		{"a caller on a Baton's edge", trust.Handoff{Peer: "planner", Caller: &trust.Caller{Edge: "planner", Via: trust.CallerBearer}},
			trust.Decision{Reason: trust.DecisionNoEdge}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := p.Inbound(tc.h)
			if got.Allow != tc.want.Allow || got.Reason != tc.want.Reason || got.Posture != tc.want.Posture {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if !got.Allow && got.Detail == "" {
				t.Error("a denial without detail")
			}
		})
	}
	_, err = trust.NewPolicy([]trust.EdgeRule{{Peer: "out", Callers: true}},
		[]trust.EdgeRule{{Peer: "web", Callers: true, RequireSignature: true}})
	for _, want := range []string{"outbound[0].callers", "inbound[0].require_signature"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewPolicy = %v, want an error with %q", err, want)
		}
	}
}
