package proxy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// The bearer tokens of the web edge, as the environment holds them.
const (
	webToken1 = "web-token-0123456789abcdef"
	webToken2 = "web-token-fedcba9876543210"
	jwtIssuer = "https://auth.example.com/"
)

// callerBaton starts analyst's Baton with the edges given (YAML list items)
// and the web tokens in its environment, in front of an agent that counts
// its calls; a nil store is the memory store.
func callerBaton(t *testing.T, edges string, store state.Store) (*baton, *seen) {
	t.Helper()
	got := &seen{}
	ag := httptest.NewServer(got.handler(http.StatusOK, `{"ok":true}`))
	t.Cleanup(ag.Close)
	b := startBatonWith(t, "agent: analyst\nupstream: "+ag.URL+"\nedges:\n"+edges, store, func(o *proxy.Options) {
		o.Env = func(k string) string {
			if k == "WEB_TOKENS" {
				return webToken1 + " , " + webToken2
			}
			return ""
		}
	})
	return b, got
}

// callIngress sends a POST to b's ingress as a caller that runs no Baton,
// in a trace of its own whose id it returns.
func callIngress(t *testing.T, b *baton, hdr http.Header, body string) (*http.Response, string) {
	t.Helper()
	tp, trace := newTraceparent(t)
	req, err := http.NewRequest(http.MethodPost, "http://"+b.IngressAddr()+"/task", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", tp)
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, trace
}

// callerReceipt waits for the receipt of trace at b to be final.
func callerReceipt(t *testing.T, b *baton, trace string) record.Record {
	t.Helper()
	v := waitTrace(t, b.AdminAddr(), trace, func(v records.TraceView) bool {
		return len(v.Records) == 1 && v.Records[0].State != record.Sent
	})
	return v.Records[0]
}

// refusal reads a caller refusal's problem document.
func refusal(t *testing.T, resp *http.Response) trustProblem {
	t.Helper()
	var p trustProblem
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want a problem", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCallerBearer: a caller that runs no Baton, with a bearer token from
// its network, is named by the web edge: its Idempotency-Key window works
// (the second send replayed, the agent called once), the agent gets its
// Authorization untouched and no hop the caller claimed, and the receipt
// names it. The agent gets the caller's identity, not its token. A wrong
// token is refused, an absent one challenged; a Baton that claims the
// edge's name is refused.
func TestCallerBearer(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	b, agent := callerBaton(t, "  - {from: planner}\n"+
		"  - {from: web, callers: {networks: [127.0.0.1/32], bearer: {tokens_env: WEB_TOKENS}}}\n",
		redisStoreWithPrefix(t, url, redistest.Prefix(t, url)))
	hdr := http.Header{"Authorization": {"Bearer " + webToken2}, "Idempotency-Key": {`"order-42"`}, "Baton-Hop": {"7"}}
	first, trace := callIngress(t, b, hdr, `{"order":42}`)
	if first.StatusCode != http.StatusOK || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first send: %d, replayed %q", first.StatusCode, first.Header.Get("Idempotent-Replayed"))
	}
	second, _ := callIngress(t, b, hdr, `{"order":42}`)
	body, _ := io.ReadAll(second.Body)
	if second.StatusCode != http.StatusOK || second.Header.Get("Idempotent-Replayed") != "true" || string(body) != `{"ok":true}` {
		t.Fatalf("second send: %d, replayed %q, %s", second.StatusCode, second.Header.Get("Idempotent-Replayed"), body)
	}
	if n := agent.count(); n != 1 {
		t.Fatalf("the agent was called %d times, want once", n)
	}
	got := agent.last(t)
	if got.Header.Get("Authorization") != "" || got.Header.Get("Baton-Agent") != "web" || got.Header.Get("Baton-Hop") != "" ||
		got.Header.Get("Baton-Caller") != "bearer" {
		t.Errorf("the agent got Authorization %q, Baton-Agent %q, Baton-Hop %q, Baton-Caller %q", got.Header.Get("Authorization"),
			got.Header.Get("Baton-Agent"), got.Header.Get("Baton-Hop"), got.Header.Get("Baton-Caller"))
	}
	rec := callerReceipt(t, b, trace)
	if rec.From != "web" || rec.To != "analyst" || rec.Caller != "bearer" || rec.Hop != 1 || rec.Key != "order-42" ||
		!slices.Contains(rec.Trust, "posture=evaluate") {
		t.Errorf("receipt %+v", rec)
	}

	for _, tc := range []struct {
		name   string
		hdr    http.Header
		status int
		class  string
		reason string
	}{
		{"wrong token", http.Header{"Authorization": {"Bearer " + webToken1 + "0"}}, http.StatusUnauthorized, "bad-credential", "bad_token"},
		{"no token", nil, http.StatusUnauthorized, "missing-credential", ""},
		{"a Baton claiming the edge's name", http.Header{"Authorization": {"Bearer " + webToken1}, "Baton-Agent": {"web"}},
			http.StatusForbidden, "policy-denied", "no_edge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := callIngress(t, b, tc.hdr, `{}`)
			p := refusal(t, resp)
			if resp.StatusCode != tc.status || !strings.HasSuffix(p.Type, "#"+tc.class) || p.Reason != tc.reason {
				t.Errorf("%d %s (reason %q), want %d %s (%s)", resp.StatusCode, p.Type, p.Reason, tc.status, tc.class, tc.reason)
			}
			if challenge := resp.Header.Get("WWW-Authenticate"); (tc.status == http.StatusUnauthorized) != strings.HasPrefix(challenge, "Bearer") {
				t.Errorf("WWW-Authenticate %q on a %d", challenge, tc.status)
			}
		})
	}
	if n := agent.count(); n != 1 {
		t.Errorf("refused callers reached the agent: %d calls", n)
	}
}

// TestCallerDerivedKey: a caller that sent no Idempotency-Key gets back the
// key its handling ran under, the one its receipt holds.
func TestCallerDerivedKey(t *testing.T) {
	t.Parallel()
	b, _ := callerBaton(t, "  - {from: web, callers: {bearer: {tokens_env: WEB_TOKENS}}}\n", nil)
	resp, trace := callIngress(t, b, http.Header{"Authorization": {"Bearer " + webToken1}}, `{"n":1}`)
	key := resp.Header.Get("Idempotency-Key")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(key, `"bk-`) {
		t.Fatalf("%d with Idempotency-Key %q, want a derived key", resp.StatusCode, key)
	}
	rec := callerReceipt(t, b, trace)
	if `"`+rec.Key+`"` != key || rec.KeySource != record.KeyFromContent || rec.Caller != "bearer" {
		t.Errorf("receipt key %q (%s, caller %q), answer's %s", rec.Key, rec.KeySource, rec.Caller, key)
	}
}

// jwtIssuerKeys is a test issuer: an ES256 key, its JWK Set, and tokens.
type jwtIssuerKeys struct {
	key  *ecdsa.PrivateKey
	jwks []byte
}

func newJWTIssuer(t *testing.T, kid string) *jwtIssuerKeys {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := k.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	jwks := fmt.Sprintf(`{"keys":[{"kty":"EC","crv":"P-256","kid":%q,"use":"sig","alg":"ES256","x":%q,"y":%q}]}`,
		kid, enc(p[1:33]), enc(p[33:]))
	return &jwtIssuerKeys{key: k, jwks: []byte(jwks)}
}

// token signs claims (over defaults: this issuer, audience analyst,
// subject svc-1, valid for an hour) with kid; a nil value drops a claim.
func (i *jwtIssuerKeys) token(t *testing.T, kid string, kv ...any) string {
	t.Helper()
	now := time.Now()
	c := jwt.MapClaims{"iss": jwtIssuer, "aud": "analyst", "sub": "svc-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for j := 0; j < len(kv); j += 2 {
		if kv[j+1] == nil {
			delete(c, kv[j].(string))
		} else {
			c[kv[j].(string)] = kv[j+1]
		}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(i.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCallerJWT: callers with a JWT, its issuer's keys in a JWK Set file
// (edge app) or at a URL (edge hook): a valid token is admitted and named
// by its subject; an expired one, one for another audience or issuer, one
// naming an unknown key, and one signed with alg none are refused.
func TestCallerJWT(t *testing.T) {
	t.Parallel()
	fileIss, urlIss := newJWTIssuer(t, "file-1"), newJWTIssuer(t, "url-1")
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, fileIss.jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(urlIss.jwks)
	}))
	t.Cleanup(srv.Close)
	b, agent := callerBaton(t, fmt.Sprintf(
		"  - {from: app, callers: {jwt: {issuer: %q, audience: analyst, jwks_file: %q}}}\n"+
			"  - {from: hook, callers: {networks: [127.0.0.1/32], jwt: {issuer: %q, audience: analyst, jwks_url: %q}}}\n",
		jwtIssuer, jwks, jwtIssuer, srv.URL+"/jwks.json"), nil)

	for _, tc := range []struct {
		name, token, from string
	}{
		{"file", fileIss.token(t, "file-1"), "app"},
		{"url", urlIss.token(t, "url-1", "sub", "svc-2"), "hook"},
	} {
		resp, trace := callIngress(t, b, http.Header{"Authorization": {"Bearer " + tc.token}}, `{}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: a valid token got %d: %+v", tc.name, resp.StatusCode, refusal(t, resp))
		}
		rec := callerReceipt(t, b, trace)
		if rec.From != tc.from || !strings.HasPrefix(rec.Caller, "jwt:svc-") {
			t.Errorf("%s: receipt from %q, caller %q", tc.name, rec.From, rec.Caller)
		}
		if h := agent.last(t).Header; h.Get("Authorization") != "" || h.Get("Baton-Caller") != "jwt" || h.Get("Baton-Caller-Subject") != rec.Caller[len("jwt:"):] {
			t.Errorf("%s: the agent got Authorization %q, Baton-Caller %q, Baton-Caller-Subject %q", tc.name,
				h.Get("Authorization"), h.Get("Baton-Caller"), h.Get("Baton-Caller-Subject"))
		}
	}

	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": jwtIssuer, "aud": "analyst", "sub": "x",
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token, reason string
	}{
		{"expired", fileIss.token(t, "file-1", "exp", time.Now().Add(-2*time.Minute).Unix()), "expired"},
		{"wrong audience", urlIss.token(t, "url-1", "aud", "summarizer"), "audience"},
		{"wrong issuer", fileIss.token(t, "file-1", "iss", "https://other.example.com/"), "issuer"},
		{"unknown kid", urlIss.token(t, "url-2"), "unknown_key"},
		{"alg none", none, "bad_signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := callIngress(t, b, http.Header{"Authorization": {"Bearer " + tc.token}}, `{}`)
			p := refusal(t, resp)
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasSuffix(p.Type, "#bad-credential") || p.Reason != tc.reason {
				t.Errorf("%d %s (reason %q: %s), want 401 bad-credential (%s)", resp.StatusCode, p.Type, p.Reason, p.Detail, tc.reason)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer realm="analyst", error="invalid_token"` {
				t.Errorf("WWW-Authenticate %q", got)
			}
		})
	}
	if n := agent.count(); n != 2 {
		t.Errorf("the agent was called %d times, want 2", n)
	}
}

// TestCallerNetworks: an anonymous edge admits callers from its networks
// only (127.0.0.1/32 here, not 10.0.0.0/8), names them by address, and
// takes their content as untrusted; an anonymous edge without networks
// admits anyone.
func TestCallerNetworks(t *testing.T) {
	t.Parallel()
	b, _ := callerBaton(t, "  - {from: far, callers: {networks: [10.0.0.0/8], anonymous: true}}\n"+
		"  - {from: near, callers: {networks: [127.0.0.1/32], anonymous: true}}\n", nil)
	resp, trace := callIngress(t, b, nil, `{}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a caller from 127.0.0.1: %d", resp.StatusCode)
	}
	if rec := callerReceipt(t, b, trace); rec.From != "near" || rec.Caller != "network:127.0.0.1" || !slices.Contains(rec.Trust, "posture=untrusted") {
		t.Errorf("receipt %+v", rec)
	}

	far, _ := callerBaton(t, "  - {from: far, callers: {networks: [10.0.0.0/8], anonymous: true}}\n", nil)
	resp, _ = callIngress(t, far, nil, `{}`)
	if p := refusal(t, resp); resp.StatusCode != http.StatusForbidden || p.Reason != "no_edge" || !strings.Contains(p.Detail, "127.0.0.1") {
		t.Errorf("a caller from outside 10.0.0.0/8: %d %+v", resp.StatusCode, p)
	}

	anyone, _ := callerBaton(t, "  - {from: anyone, callers: {anonymous: true}}\n", nil)
	resp, trace = callIngress(t, anyone, http.Header{"Authorization": {"Basic eDp5"}}, `{}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("an anonymous caller: %d", resp.StatusCode)
	}
	if rec := callerReceipt(t, anyone, trace); rec.From != "anyone" || rec.Caller != "anonymous" {
		t.Errorf("receipt %+v", rec)
	}
}

// TestCallerBatonNotMatched: a handoff from a real Baton carries
// Baton-Agent, so it is never matched to a callers edge, even with a token
// the callers edge would accept.
func TestCallerBatonNotMatched(t *testing.T) {
	t.Parallel()
	b, agent := callerBaton(t, "  - {from: planner}\n"+
		"  - {from: web, callers: {bearer: {tokens_env: WEB_TOKENS}}}\n", nil)
	planner := startBaton(t, "agent: planner\nupstream: http://127.0.0.1:1\npeers: {analyst: {url: http://"+
		b.IngressAddr()+"}}\nedges: [{to: analyst}]\n", nil)
	tp, trace := newTraceparent(t)
	resp := send(t, planner.EgressAddr(), "analyst", http.MethodPost, "/task", `{}`,
		http.Header{"Authorization": {"Bearer " + webToken1}, "Traceparent": {tp}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("planner's handoff: %d", resp.StatusCode)
	}
	if got := agent.last(t); got.Header.Get("Baton-Agent") != "planner" || got.Header.Get("Authorization") != "Bearer "+webToken1 {
		t.Errorf("the agent got Baton-Agent %q, Authorization %q", got.Header.Get("Baton-Agent"), got.Header.Get("Authorization"))
	}
	v := waitTrace(t, b.AdminAddr(), trace, func(v records.TraceView) bool {
		for _, r := range v.Records {
			if r.Side == record.Ingress && r.State != record.Sent {
				return true
			}
		}
		return false
	})
	for _, r := range v.Records {
		if r.Side == record.Ingress && (r.From != "planner" || r.Caller != "" || r.Hop != 1) {
			t.Errorf("receipt %+v", r)
		}
	}
}
