package middleware

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/trust"
)

// noKeySource is a JWT key source that never had keys.
type noKeySource struct{}

func (noKeySource) KeySet(context.Context, string) (*trust.KeySet, error) {
	return nil, trust.ErrKeysUnavailable
}

// unsignedJWT parses as an ES256 JWT but is signed by nobody.
var unsignedJWT = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","typ":"JWT","kid":"k"}`)) + "." +
	base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"i","aud":"a"}`)) + ".AAAA"

// TestCallers runs Callers, Verify and HopGuard as the ingress chain does:
// a caller that runs no Baton is named by its edge, a Baton passes as
// before, and the refusals are 401, 403 and 503.
func TestCallers(t *testing.T) {
	t.Parallel()
	const token = "web-token-0123456789abcdef"
	m, err := trust.NewCallers([]trust.CallerRule{
		{Edge: "web", Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Tokens: []string{token}},
		{Edge: "app", Networks: []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")},
			JWT: &trust.JWTRule{Issuer: "i", Audience: "a", Keys: noKeySource{}}},
		{Edge: "lan", Networks: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}, Anonymous: true},
		{Edge: "ops", Networks: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10")}, Tokens: []string{token}, Forward: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := trust.NewPolicy(nil, []trust.EdgeRule{
		{Peer: "web", Callers: true}, {Peer: "app", Callers: true}, {Peer: "lan", Callers: true}, {Peer: "ops", Callers: true},
		{Peer: "planner"},
	})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		from, caller, posture, agentHdr, auth, grant string
		via, subject                                 string
		hop                                          int
	}
	chain := func(m CallerMatcher) (http.Handler, *seen) {
		var got seen
		end := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			got = seen{from: in.From, caller: in.Caller.String(), posture: in.Posture, hop: in.Hop,
				agentHdr: r.Header.Get(HeaderAgent), auth: r.Header.Get("Authorization"), grant: r.Header.Get(HeaderGrant),
				via: r.Header.Get(HeaderCaller), subject: r.Header.Get(HeaderCallerSubject)}
			w.WriteHeader(http.StatusNoContent)
		})
		h := Callers(CallersOptions{Matcher: m, Realm: "analyst"})(Verify(VerifyOptions{Policy: pol})(HopGuard(func(string) int { return 8 })(end)))
		return h, &got
	}
	tests := []struct {
		name      string
		remote    string
		hdr       map[string]string
		status    int
		want      seen   // on 204
		class     string // on a refusal
		reason    string
		challenge string
	}{
		{name: "bearer: the token stays at the edge", remote: "10.1.2.3:5000",
			hdr: map[string]string{"Authorization": "Bearer " + token, HeaderHop: "7", HeaderGrant: "e30",
				HeaderCaller: "jwt", HeaderCallerSubject: "admin"},
			status: http.StatusNoContent,
			want:   seen{from: "web", caller: "bearer", posture: "evaluate", agentHdr: "web", via: "bearer", hop: 1}},
		{name: "bearer on an edge that forwards it", remote: "100.64.0.1:5000",
			hdr:    map[string]string{"Authorization": "Bearer " + token},
			status: http.StatusNoContent,
			want:   seen{from: "ops", caller: "bearer", posture: "evaluate", agentHdr: "ops", via: "bearer", auth: "Bearer " + token, hop: 1}},
		{name: "anonymous from its network", remote: "192.168.0.9:5000", status: http.StatusNoContent,
			want: seen{from: "lan", caller: "network:192.168.0.9", posture: "untrusted", agentHdr: "lan", via: "network",
				subject: "192.168.0.9", hop: 1}},
		{name: "anonymous: an unverified Authorization is not the edge's", remote: "192.168.0.9:5000",
			hdr: map[string]string{"Authorization": "Basic eDp5"}, status: http.StatusNoContent,
			want: seen{from: "lan", caller: "network:192.168.0.9", posture: "untrusted", agentHdr: "lan", via: "network",
				subject: "192.168.0.9", auth: "Basic eDp5", hop: 1}},
		{name: "wrong token", remote: "10.1.2.3:5000", hdr: map[string]string{"Authorization": "Bearer nope"},
			status: http.StatusUnauthorized, class: string(problem.BadCredential), reason: trust.CredentialBadToken,
			challenge: `Bearer realm="analyst", error="invalid_token"`},
		{name: "not a bearer credential", remote: "10.1.2.3:5000", hdr: map[string]string{"Authorization": "Basic eDp5"},
			status: http.StatusUnauthorized, class: string(problem.BadCredential), reason: trust.CredentialScheme,
			challenge: `Bearer realm="analyst"`},
		{name: "no credential: challenged", remote: "10.1.2.3:5000",
			status: http.StatusUnauthorized, class: string(problem.MissingCredential), challenge: `Bearer realm="analyst"`},
		{name: "no credential from where no edge admits it", remote: "203.0.113.1:5000",
			status: http.StatusForbidden, class: string(problem.PolicyDenied), reason: trust.DecisionNoEdge},
		{name: "token from outside its networks", remote: "203.0.113.1:5000", hdr: map[string]string{"Authorization": "Bearer " + token},
			status: http.StatusForbidden, class: string(problem.PolicyDenied), reason: trust.DecisionNoEdge},
		{name: "keys never fetched", remote: "172.16.0.1:5000", hdr: map[string]string{"Authorization": "Bearer " + unsignedJWT},
			status: http.StatusServiceUnavailable, class: string(problem.NotReady)},
		{name: "a Baton claiming a callers edge's name", remote: "10.1.2.3:5000",
			hdr:    map[string]string{HeaderAgent: "web", "Authorization": "Bearer " + token},
			status: http.StatusForbidden, class: string(problem.PolicyDenied), reason: trust.DecisionNoEdge},
		{name: "a Baton", remote: "10.1.2.3:5000", hdr: map[string]string{HeaderAgent: "planner", HeaderHop: "3"},
			status: http.StatusNoContent,
			want:   seen{from: "planner", posture: "untrusted", agentHdr: "planner", hop: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, got := chain(m)
			r := httptest.NewRequest(http.MethodPost, "/task", strings.NewReader("{}"))
			r.RemoteAddr = tc.remote
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			in := &Info{Side: Ingress, Agent: "analyst"}
			r = r.WithContext(WithInfo(r.Context(), in))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.status == http.StatusNoContent {
				if *got != tc.want {
					t.Errorf("the agent saw %+v, want %+v", *got, tc.want)
				}
				return
			}
			var doc struct{ Type, Reason string }
			if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Type != problem.TypeBase+tc.class || doc.Reason != tc.reason {
				t.Errorf("problem %s (reason %q), want %s (reason %q)", doc.Type, doc.Reason, tc.class, tc.reason)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			wantDenial := ""
			switch tc.class {
			case string(problem.BadCredential):
				wantDenial = DenialBadCredential
			case string(problem.MissingCredential):
				wantDenial = DenialMissingCredential
			case string(problem.PolicyDenied):
				wantDenial = tc.reason
			}
			if in.PolicyDenial != wantDenial {
				t.Errorf("PolicyDenial %q, want %q", in.PolicyDenial, wantDenial)
			}
		})
	}
}

// TestCallersNone: with no callers edge the middleware is not there, and
// a caller without a Baton meets the policy as before.
func TestCallersNone(t *testing.T) {
	t.Parallel()
	end := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	if h := Callers(CallersOptions{})(end); h == nil {
		t.Fatal("Callers(nil) returned no handler")
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	Callers(CallersOptions{})(end).ServeHTTP(w, r)
	if w.Code != http.StatusNoContent {
		t.Errorf("status %d, want 204", w.Code)
	}
	if (&Info{}).SenderRunsNoBaton() != true || (&Info{From: "planner"}).SenderRunsNoBaton() ||
		!(&Info{From: "web", Caller: &trust.Caller{Edge: "web", Via: trust.CallerBearer}}).SenderRunsNoBaton() {
		t.Error("SenderRunsNoBaton is wrong")
	}
}
