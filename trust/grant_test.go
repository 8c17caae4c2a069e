package trust_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/batonproxy/baton/trust"
)

func TestGrantEncodeDecode(t *testing.T) {
	t.Parallel()
	g := trust.Grant{MayHandoffTo: []string{"writer", "summarizer", "writer"}, SideEffects: []string{"email.send", "db.read"}}
	s, err := trust.EncodeGrant(g)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := base64.RawURLEncoding.DecodeString(s)
	if want := `{"may_handoff_to":["summarizer","writer"],"side_effects":["db.read","email.send"]}`; string(js) != want {
		t.Errorf("encoded JSON %s, want %s", js, want)
	}
	got, err := trust.DecodeGrant(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := (trust.Grant{MayHandoffTo: []string{"summarizer", "writer"}, SideEffects: []string{"db.read", "email.send"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeGrant = %+v, want %+v", got, want)
	}

	empty, err := trust.EncodeGrant(trust.Grant{})
	if err != nil {
		t.Fatal(err)
	}
	if js, _ := base64.RawURLEncoding.DecodeString(empty); string(js) != `{"may_handoff_to":[],"side_effects":[]}` {
		t.Errorf("empty grant encodes as %s", js)
	}
	if g, err := trust.DecodeGrant(empty); err != nil || g.Allows("anyone") || g.MayHandoffTo == nil {
		t.Errorf("empty grant decodes as %+v, %v", g, err)
	}

	if _, err := trust.EncodeGrant(trust.Grant{MayHandoffTo: []string{"Bad Name"}}); !errors.Is(err, trust.ErrGrant) {
		t.Errorf("EncodeGrant of a bad name: %v", err)
	}
}

func TestDecodeGrantRefuses(t *testing.T) {
	t.Parallel()
	enc := base64.RawURLEncoding.EncodeToString
	many := make([]string, trust.MaxGrantEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"p%d"`, i)
	}
	tests := []struct {
		name, in, wantErr string
	}{
		{"padded", base64.URLEncoding.EncodeToString([]byte(`{"may_handoff_to":[],"side_effects":[]} `)), "base64url"},
		{"standard alphabet", base64.RawStdEncoding.EncodeToString([]byte(`{"may_handoff_to":[">>>"],"side_effects":[]}`)), "base64url"},
		{"too long", strings.Repeat("A", trust.MaxGrantHeaderLen+1), "more than"},
		{"empty", "", "not a JSON object"},
		{"array", enc([]byte(`[]`)), "not a JSON object"},
		{"empty object", enc([]byte(`{}`)), "may_handoff_to is missing"},
		{"side effects missing", enc([]byte(`{"may_handoff_to":[]}`)), "side_effects is missing"},
		{"null list", enc([]byte(`{"may_handoff_to":null,"side_effects":[]}`)), "must be an array"},
		{"string list", enc([]byte(`{"may_handoff_to":"a","side_effects":[]}`)), "must be an array"},
		{"number in list", enc([]byte(`{"may_handoff_to":[1],"side_effects":[]}`)), "must be an array"},
		{"null in list", enc([]byte(`{"may_handoff_to":[null],"side_effects":[]}`)), "1 to 128 characters"},
		{"unknown key", enc([]byte(`{"may_handoff_to":[],"side_effects":[],"admin":true}`)), `unknown key "admin"`},
		{"key case", enc([]byte(`{"May_Handoff_To":[],"side_effects":[]}`)), "unknown key"},
		{"repeated key", enc([]byte(`{"may_handoff_to":[],"side_effects":[],"may_handoff_to":["x"]}`)), "repeated"},
		{"data after", enc([]byte(`{"may_handoff_to":[],"side_effects":[]} {}`)), "data after"},
		{"bad name", enc([]byte(`{"may_handoff_to":["../etc"],"side_effects":[]}`)), "not allowed"},
		{"too many", enc([]byte(`{"may_handoff_to":[` + strings.Join(many, ",") + `],"side_effects":[]}`)), "more than 64"},
		{"truncated", enc([]byte(`{"may_handoff_to":[`)), "baton-grant"},
	}
	if !strings.HasSuffix(tests[0].in, "=") || !strings.ContainsAny(tests[1].in, "+/") {
		t.Fatalf("the first two rows do not test what they say: %s, %s", tests[0].in, tests[1].in)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := trust.DecodeGrant(tc.in)
			if err == nil || !errors.Is(err, trust.ErrGrant) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("DecodeGrant = %+v, %v; want error with %q", g, err, tc.wantErr)
			}
		})
	}
}

// TestGrantAttenuation follows a grant along planner → analyst → summarizer
// → writer: each Baton passes on Intersect(grant received, grant its config
// gives the edge), and checks its agent's next handoff against the grant it
// received.
func TestGrantAttenuation(t *testing.T) {
	t.Parallel()
	// What each Baton's configuration grants on its outbound edge.
	edge := map[string]*trust.Grant{
		"planner→analyst": {MayHandoffTo: []string{"summarizer", "writer", "search"}, SideEffects: []string{"web.fetch", "doc.write"}},
		// The analyst's operator would give the summarizer more than the
		// analyst holds (email.send, mailer): it must not get through.
		"analyst→summarizer": {MayHandoffTo: []string{"writer", "mailer"}, SideEffects: []string{"doc.write", "email.send"}},
		"summarizer→writer":  nil, // no edge grant: pass on what was received
	}
	hops := []struct {
		from, to   string
		wantSent   *trust.Grant // the grant in Baton-Grant for `to`
		allowed    []string     // peers `to` may hand off to next
		refused    []string
		sideEffect string // one side effect `to` may commit
		noEffect   string // and one it may not
	}{
		{from: "planner", to: "analyst",
			wantSent: &trust.Grant{MayHandoffTo: []string{"summarizer", "writer", "search"}, SideEffects: []string{"web.fetch", "doc.write"}},
			allowed:  []string{"summarizer", "writer"}, refused: []string{"mailer"}, sideEffect: "web.fetch", noEffect: "email.send"},
		{from: "analyst", to: "summarizer",
			wantSent: &trust.Grant{MayHandoffTo: []string{"writer"}, SideEffects: []string{"doc.write"}},
			allowed:  []string{"writer"}, refused: []string{"mailer", "search", "summarizer"}, sideEffect: "doc.write", noEffect: "email.send"},
		{from: "summarizer", to: "writer",
			wantSent: &trust.Grant{MayHandoffTo: []string{"writer"}, SideEffects: []string{"doc.write"}},
			allowed:  []string{"writer"}, refused: []string{"mailer"}, sideEffect: "doc.write", noEffect: "web.fetch"},
	}
	var received *trust.Grant // the planner starts the chain: no grant
	for _, h := range hops {
		if !received.Allows(h.to) {
			t.Fatalf("%s may not hand off to %s under %+v", h.from, h.to, received)
		}
		sent := trust.Intersect(received, edge[h.from+"→"+h.to])
		// Over the wire and back, as the receiving Baton reads it.
		wire, err := trust.EncodeGrant(*sent)
		if err != nil {
			t.Fatal(err)
		}
		got, err := trust.DecodeGrant(wire)
		if err != nil {
			t.Fatal(err)
		}
		if !sameSet(got.MayHandoffTo, h.wantSent.MayHandoffTo) || !sameSet(got.SideEffects, h.wantSent.SideEffects) {
			t.Errorf("%s→%s: sent %+v, want %+v", h.from, h.to, got, h.wantSent)
		}
		for _, p := range h.allowed {
			if !got.Allows(p) {
				t.Errorf("%s may not hand off to %s, want allowed", h.to, p)
			}
		}
		for _, p := range h.refused {
			if got.Allows(p) {
				t.Errorf("%s may hand off to %s: escalation", h.to, p)
			}
		}
		if !got.AllowsSideEffect(h.sideEffect) || got.AllowsSideEffect(h.noEffect) {
			t.Errorf("%s: side effects %v: %s should be allowed, %s not", h.to, got.SideEffects, h.sideEffect, h.noEffect)
		}
		received = &got
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !strings.Contains(","+strings.Join(b, ",")+",", ","+x+",") {
			return false
		}
	}
	return true
}

func TestIntersect(t *testing.T) {
	t.Parallel()
	a := &trust.Grant{MayHandoffTo: []string{"x", "y", "x"}, SideEffects: []string{"s"}}
	b := &trust.Grant{MayHandoffTo: []string{"y", "z"}, SideEffects: []string{}}
	tests := []struct {
		name string
		a, b *trust.Grant
		want *trust.Grant
	}{
		{"none received, none configured", nil, nil, nil},
		{"none received: the config's grant", nil, b, &trust.Grant{MayHandoffTo: []string{"y", "z"}, SideEffects: []string{}}},
		{"none configured: passed on", a, nil, &trust.Grant{MayHandoffTo: []string{"x", "y"}, SideEffects: []string{"s"}}},
		{"both", a, b, &trust.Grant{MayHandoffTo: []string{"y"}, SideEffects: []string{}}},
		{"commutes on content", b, a, &trust.Grant{MayHandoffTo: []string{"y"}, SideEffects: []string{}}},
		{"empty narrows to nothing", a, &trust.Grant{}, &trust.Grant{MayHandoffTo: []string{}, SideEffects: []string{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := trust.Intersect(tc.a, tc.b); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Intersect = %+v, want %+v", got, tc.want)
			}
		})
	}
	got := trust.Intersect(a, nil)
	got.MayHandoffTo[0] = "changed"
	if a.MayHandoffTo[0] != "x" {
		t.Error("Intersect's result shares memory with its input")
	}
	var none *trust.Grant
	if !none.Allows("anyone") || !none.AllowsSideEffect("anything") {
		t.Error("a nil grant (none received) should bound nothing")
	}
}
