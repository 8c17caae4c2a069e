package trust_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/batonproxy/baton/trust"
)

// staticKeys is a KeySource of one set.
type staticKeys struct{ set *trust.KeySet }

func (s staticKeys) KeySet(context.Context, string) (*trust.KeySet, error) { return s.set, nil }

// noKeys is a KeySource that never had a set.
type noKeys struct{}

func (noKeys) KeySet(context.Context, string) (*trust.KeySet, error) {
	return nil, trust.ErrKeysUnavailable
}

func signJWT(t testing.TB, m jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const (
	issuer   = "https://auth.example.com/"
	audience = "analyst"
	token1   = "web-token-0123456789abcdef"
	token2   = "web-token-fedcba9876543210"
)

func TestCallersMatch(t *testing.T) {
	t.Parallel()
	ec, other := mustEC(t), mustEC(t)
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	edPub, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, err := trust.ParseJWKS(jwksJSON(ecJWK("ec-1", &ec.PublicKey), rsaJWK("rsa-1", &rk.PublicKey), edJWK("ed-1", edPub)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	claims := func(kv ...any) jwt.MapClaims {
		c := jwt.MapClaims{"iss": issuer, "aud": audience, "sub": "user-7", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(c, kv[i].(string))
			} else {
				c[kv[i].(string)] = kv[i+1]
			}
		}
		return c
	}
	es := func(c jwt.MapClaims) string { return signJWT(t, jwt.SigningMethodES256, ec, "ec-1", c) }
	m, err := trust.NewCallers([]trust.CallerRule{
		{Edge: "web", Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Tokens: []string{token1, token2}},
		{Edge: "app", JWT: &trust.JWTRule{Issuer: issuer, Audience: audience, Keys: staticKeys{set}}},
		{Edge: "lan", Networks: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00::/8")}, Anonymous: true},
		{Edge: "down", Networks: []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")}, JWT: &trust.JWTRule{Issuer: issuer, Audience: audience, Keys: noKeys{}}},
	}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	inside, outside := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("203.0.113.9")
	tests := []struct {
		name   string
		src    netip.Addr
		auth   []string
		caller string // the match, or
		reason string // the CredentialError's reason, or "" for ErrNoCallerEdge
	}{
		{name: "bearer from its network", src: inside, auth: []string{"Bearer " + token1}, caller: "web bearer"},
		{name: "second token, scheme in lower case", src: inside, auth: []string{"bearer " + token2}, caller: "web bearer"},
		{name: "bearer from elsewhere is no bearer edge's", src: outside, auth: []string{"Bearer " + token1}, reason: trust.CredentialMalformed},
		{name: "wrong token", src: inside, auth: []string{"Bearer " + token1 + "x"}, reason: trust.CredentialBadToken},
		{name: "no credential, where an edge wants one", src: outside, reason: trust.CredentialMissing},
		{name: "not a Bearer scheme", src: inside, auth: []string{"Basic dXNlcjpwYXNz"}, reason: trust.CredentialScheme},
		{name: "two Authorization headers", src: inside, auth: []string{"Bearer " + token1, "Bearer " + token2}, reason: trust.CredentialScheme},
		{name: "ES256", src: outside, auth: []string{"Bearer " + es(claims())}, caller: "app jwt:user-7"},
		{name: "RS256", src: outside, auth: []string{"Bearer " + signJWT(t, jwt.SigningMethodRS256, rk, "rsa-1", claims())}, caller: "app jwt:user-7"},
		{name: "EdDSA without kid", src: outside, auth: []string{"Bearer " + signJWT(t, jwt.SigningMethodEdDSA, edKey, "", claims())}, caller: "app jwt:user-7"},
		{name: "no subject", src: outside, auth: []string{"Bearer " + es(claims("sub", nil))}, caller: "app jwt"},
		{name: "expired", src: outside, auth: []string{"Bearer " + es(claims("exp", now.Add(-2*time.Minute).Unix()))}, reason: trust.CredentialExpired},
		{name: "expired within the leeway", src: outside, auth: []string{"Bearer " + es(claims("exp", now.Add(-30*time.Second).Unix()))}, caller: "app jwt:user-7"},
		{name: "no exp", src: outside, auth: []string{"Bearer " + es(claims("exp", nil))}, reason: trust.CredentialClaims},
		{name: "not yet valid", src: outside, auth: []string{"Bearer " + es(claims("nbf", now.Add(5*time.Minute).Unix()))}, reason: trust.CredentialNotYetValid},
		{name: "issued in the future", src: outside, auth: []string{"Bearer " + es(claims("iat", now.Add(5*time.Minute).Unix()))}, reason: trust.CredentialNotYetValid},
		{name: "wrong audience", src: outside, auth: []string{"Bearer " + es(claims("aud", "summarizer"))}, reason: trust.CredentialAudience},
		{name: "audience among several", src: outside, auth: []string{"Bearer " + es(claims("aud", []string{"x", audience}))}, caller: "app jwt:user-7"},
		{name: "wrong issuer", src: outside, auth: []string{"Bearer " + es(claims("iss", "https://evil.example/"))}, reason: trust.CredentialIssuer},
		{name: "unknown kid", src: outside, auth: []string{"Bearer " + signJWT(t, jwt.SigningMethodES256, ec, "ec-2", claims())}, reason: trust.CredentialUnknownKey},
		{name: "another key under a known kid", src: outside, auth: []string{"Bearer " + signJWT(t, jwt.SigningMethodES256, other, "ec-1", claims())}, reason: trust.CredentialSignature},
		{name: "alg none", src: outside, auth: []string{"Bearer " + none}, reason: trust.CredentialSignature},
		{name: "HS256 with the public key as secret", src: outside, auth: []string{"Bearer " + signJWT(t, jwt.SigningMethodHS256, []byte(b64u.EncodeToString(edPub)), "ed-1", claims())}, reason: trust.CredentialSignature},
		{name: "anonymous from its network", src: netip.MustParseAddr("192.168.1.5"), caller: "lan network:192.168.1.5"},
		{name: "anonymous, IPv4-mapped IPv6 source", src: netip.MustParseAddr("::ffff:192.168.1.5"), caller: "lan network:192.168.1.5"},
		{name: "anonymous from an IPv6 network", src: netip.MustParseAddr("fd00::1"), caller: "lan network:fd00::1"},
		{name: "anonymous, with a credential for the agent", src: netip.MustParseAddr("192.168.1.5"), auth: []string{"Basic dXNlcjpwYXNz"}, caller: "lan network:192.168.1.5"},
		{name: "keys never fetched", src: netip.MustParseAddr("172.16.0.1"), auth: []string{"Bearer " + es(claims())}, caller: "app jwt:user-7"},
		{name: "keys never fetched, no other edge", src: netip.MustParseAddr("172.16.0.1"), auth: []string{"Bearer " + signJWT(t, jwt.SigningMethodES256, ec, "ec-9", claims())}, reason: trust.CredentialNoKeys},
		{name: "a claim refused says more than keys never fetched", src: netip.MustParseAddr("172.16.0.1"), auth: []string{"Bearer " + es(claims("aud", "x"))}, reason: trust.CredentialAudience},
		{name: "a bad signature says more than an unknown token", src: inside, auth: []string{"Bearer " + signJWT(t, jwt.SigningMethodES256, other, "ec-1", claims())}, reason: trust.CredentialSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := m.Match(context.Background(), trust.CallerRequest{Source: tc.src, Authorization: tc.auth})
			if tc.caller != "" {
				if err != nil {
					t.Fatalf("Match: %v", err)
				}
				if got := c.Edge + " " + c.String(); got != tc.caller {
					t.Errorf("matched %q, want %q", got, tc.caller)
				}
				return
			}
			if c != nil {
				t.Fatalf("matched %+v, want none", c)
			}
			var ce *trust.CredentialError
			switch {
			case tc.reason == "" && !errors.Is(err, trust.ErrNoCallerEdge):
				t.Errorf("Match = %v, want ErrNoCallerEdge", err)
			case tc.reason != "" && (!errors.As(err, &ce) || ce.Reason != tc.reason):
				t.Errorf("Match = %v (%+v), want a CredentialError %q", err, ce, tc.reason)
			}
		})
	}
}

func TestNewCallersRefuses(t *testing.T) {
	t.Parallel()
	_, err := trust.NewCallers([]trust.CallerRule{
		{Edge: ""},
		{Edge: "web", Tokens: []string{""}},
		{Edge: "app", JWT: &trust.JWTRule{}},
	}, nil)
	for _, want := range []string{"callers[0] (\"\"): no edge name", "nobody could match", "token 0 is empty", "needs an issuer, an audience and keys"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewCallers = %v, want an error with %q", err, want)
		}
	}
}

// TestCallerString is the caller as a record names it.
func TestCallerString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    *trust.Caller
		want string
		anon bool
	}{
		{nil, "", false},
		{&trust.Caller{Via: trust.CallerJWT, Subject: "svc"}, "jwt:svc", false},
		{&trust.Caller{Via: trust.CallerBearer}, "bearer", false},
		{&trust.Caller{Via: trust.CallerNetwork, Subject: "10.0.0.1"}, "network:10.0.0.1", true},
		{&trust.Caller{Via: trust.CallerAnonymous}, "anonymous", true},
	} {
		if got := tc.c.String(); got != tc.want || tc.c.Anonymous() != tc.anon {
			t.Errorf("%+v: %q (anonymous %v), want %q (%v)", tc.c, got, tc.c.Anonymous(), tc.want, tc.anon)
		}
	}
}

// TestJWKSFileReload: a changed file is read again; one that cannot be
// used leaves the last good set in place.
func TestJWKSFileReload(t *testing.T) {
	t.Parallel()
	a, b := mustEC(t), mustEC(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	write := func(data []byte) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(jwksJSON(ecJWK("a", &a.PublicKey)))
	f, err := trust.LoadJWKSFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	has := func(kid string) bool {
		t.Helper()
		s, err := f.KeySet(context.Background(), kid)
		if err != nil {
			t.Fatal(err)
		}
		return s.HasKeyID(kid)
	}
	if !has("a") || has("b") {
		t.Fatal("the first set is not the file's")
	}
	write(jwksJSON(ecJWK("a", &a.PublicKey), ecJWK("b", &b.PublicKey)))
	if !has("b") {
		t.Fatal("the changed file was not read again")
	}
	write([]byte(`{"keys": [`))
	if !has("a") || !has("b") {
		t.Fatal("a broken file replaced the last good set")
	}
	write(jwksJSON(ecJWK("b", &b.PublicKey)))
	if has("a") || !has("b") {
		t.Fatal("a good file after a broken one was not read")
	}
	if _, err := trust.LoadJWKSFile(filepath.Join(t.TempDir(), "none.json"), nil); !errors.Is(err, trust.ErrJWKS) {
		t.Errorf("LoadJWKSFile of a missing file = %v, want ErrJWKS", err)
	}
}

// TestJWKSURL: the set is fetched on first need, again for an unknown kid
// at most once per MinRefetch, and kept when a fetch fails.
func TestJWKSURL(t *testing.T) {
	t.Parallel()
	a, b := mustEC(t), mustEC(t)
	var (
		mu      sync.Mutex
		doc     = jwksJSON(ecJWK("a", &a.PublicKey))
		status  = http.StatusOK
		fetches int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fetches++
		w.WriteHeader(status)
		w.Write(doc)
	}))
	t.Cleanup(srv.Close)
	serve := func(d []byte, s int) {
		mu.Lock()
		doc, status = d, s
		mu.Unlock()
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return fetches
	}
	u := trust.NewJWKSURL(trust.JWKSURLOptions{URL: srv.URL, MinRefetch: time.Hour})
	ctx := context.Background()
	s, err := u.KeySet(ctx, "a")
	if err != nil || !s.HasKeyID("a") || count() != 1 {
		t.Fatalf("first KeySet: %v, %d fetches", err, count())
	}
	if _, err := u.KeySet(ctx, "a"); err != nil || count() != 1 {
		t.Fatalf("a known kid fetched again: %v, %d fetches", err, count())
	}
	serve(jwksJSON(ecJWK("a", &a.PublicKey), ecJWK("b", &b.PublicKey)), http.StatusOK)
	// The first fetch was within MinRefetch: an unknown kid waits.
	if s, _ := u.KeySet(ctx, "b"); s.HasKeyID("b") || count() != 1 {
		t.Fatalf("an unknown kid fetched again within MinRefetch (%d fetches)", count())
	}

	u = trust.NewJWKSURL(trust.JWKSURLOptions{URL: srv.URL, MinRefetch: time.Nanosecond})
	serve(jwksJSON(ecJWK("a", &a.PublicKey)), http.StatusOK)
	if _, err := u.KeySet(ctx, ""); err != nil {
		t.Fatal(err)
	}
	serve(jwksJSON(ecJWK("a", &a.PublicKey), ecJWK("b", &b.PublicKey)), http.StatusOK)
	if s, err := u.KeySet(ctx, "b"); err != nil || !s.HasKeyID("b") {
		t.Fatalf("an unknown kid did not fetch the set again: %v", err)
	}
	serve(nil, http.StatusInternalServerError)
	if s, err := u.KeySet(ctx, "c"); err != nil || !s.HasKeyID("a") || !s.HasKeyID("b") {
		t.Fatalf("a failed fetch lost the last good set: %v", err)
	}

	down := trust.NewJWKSURL(trust.JWKSURLOptions{URL: srv.URL})
	if _, err := down.KeySet(ctx, "a"); !errors.Is(err, trust.ErrKeysUnavailable) {
		t.Fatalf("KeySet with no set ever fetched = %v, want ErrKeysUnavailable", err)
	}
}

// TestJWKSURLRun: Run fetches at once and every Refresh.
func TestJWKSURLRun(t *testing.T) {
	t.Parallel()
	a := mustEC(t)
	fetched := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(jwksJSON(ecJWK("a", &a.PublicKey)))
		select {
		case fetched <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	u := trust.NewJWKSURL(trust.JWKSURLOptions{URL: srv.URL, Refresh: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.Run(ctx); close(done) }()
	for range 3 {
		<-fetched
	}
	cancel()
	<-done
	if s, err := u.KeySet(context.Background(), "a"); err != nil || !s.HasKeyID("a") {
		t.Fatalf("KeySet after Run: %v", err)
	}
}

// BenchmarkCallersMatch is the cost a callers edge adds to a request: a
// bearer token among two, and an ES256 JWT.
func BenchmarkCallersMatch(b *testing.B) {
	ec := mustEC(b)
	set, err := trust.ParseJWKS(jwksJSON(ecJWK("ec-1", &ec.PublicKey)))
	if err != nil {
		b.Fatal(err)
	}
	m, err := trust.NewCallers([]trust.CallerRule{
		{Edge: "web", Tokens: []string{token1, token2}},
		{Edge: "app", JWT: &trust.JWTRule{Issuer: issuer, Audience: audience, Keys: staticKeys{set}}},
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	tok := signJWT(b, jwt.SigningMethodES256, ec, "ec-1", jwt.MapClaims{"iss": issuer, "aud": audience, "sub": "svc",
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	src := netip.MustParseAddr("10.0.0.1")
	for _, bc := range []struct{ name, auth, edge string }{
		{"bearer", "Bearer " + token2, "web"},
		{"jwt-es256", "Bearer " + tok, "app"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q := trust.CallerRequest{Source: src, Authorization: []string{bc.auth}}
			b.ReportAllocs()
			for b.Loop() {
				c, err := m.Match(context.Background(), q)
				if err != nil || c.Edge != bc.edge {
					b.Fatal(c, err)
				}
			}
		})
	}
}
