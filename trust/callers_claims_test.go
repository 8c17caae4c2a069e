package trust_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/batonproxy/baton/trust"
)

// TestCallerClaimHeaders: a verified JWT's chosen claims reach the agent
// in their headers, rendered as strings, numbers, booleans and lists of
// them; a claim that is absent, an object, or that holds a line break
// gives no header; the edge forwards the credential only when it says so.
func TestCallerClaimHeaders(t *testing.T) {
	t.Parallel()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, err := trust.ParseJWKS(jwksJSON(ecJWK("ec-1", &ec.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rule := func(edge string, forward bool) trust.CallerRule {
		return trust.CallerRule{Edge: edge, Forward: forward,
			JWT: &trust.JWTRule{Issuer: issuer, Audience: audience, Keys: staticKeys{set}},
			ClaimHeaders: []trust.ClaimHeader{
				{Header: "X-Caller-Email", Claim: "email"},
				{Header: "X-Caller-Groups", Claim: "groups"},
				{Header: "X-Caller-Roles", Claim: "realm_access.roles"},
				{Header: "X-Caller-Tenant", Claim: "https://example.com/tenant"},
				{Header: "X-Caller-Level", Claim: "level"},
				{Header: "X-Caller-Admin", Claim: "admin"},
				{Header: "X-Caller-Profile", Claim: "profile"},
				{Header: "X-Caller-Note", Claim: "note"},
				{Header: "X-Caller-Missing", Claim: "nope"},
			}}
	}
	m, err := trust.NewCallers([]trust.CallerRule{rule("app", false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := signJWT(t, jwt.SigningMethodES256, ec, "ec-1", jwt.MapClaims{
		"iss": issuer, "aud": audience, "sub": "user-7", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"email": "ada@example.com", "groups": []any{"ops", "billing"}, "realm_access": map[string]any{"roles": []any{"approver"}},
		"https://example.com/tenant": "acme", "level": 3, "admin": false,
		"profile": map[string]any{"name": "Ada"}, "note": "line one\r\nX-Injected: 1",
	})
	c, err := m.Match(context.Background(), trust.CallerRequest{Authorization: []string{"Bearer " + tok}})
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{
		{"X-Caller-Email", "ada@example.com"}, {"X-Caller-Groups", "ops,billing"}, {"X-Caller-Roles", "approver"},
		{"X-Caller-Tenant", "acme"}, {"X-Caller-Level", "3"}, {"X-Caller-Admin", "false"},
	}
	if !slices.Equal(c.Headers, want) || c.Subject != "user-7" || c.Forward {
		t.Errorf("caller %+v, want headers %v, subject user-7, not forwarded", c, want)
	}
	if got := m.IdentityHeaders(); len(got) != 9 || got[0] != "X-Caller-Email" {
		t.Errorf("IdentityHeaders = %v", got)
	}

	fwd, err := trust.NewCallers([]trust.CallerRule{rule("app", true)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := fwd.Match(context.Background(), trust.CallerRequest{Authorization: []string{"Bearer " + tok}}); err != nil || !c.Forward {
		t.Errorf("forwarding edge: %+v, %v", c, err)
	}

	// A sub that is no string is a malformed token, as before.
	bad := signJWT(t, jwt.SigningMethodES256, ec, "ec-1", jwt.MapClaims{
		"iss": issuer, "aud": audience, "sub": 7, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	var ce *trust.CredentialError
	if _, err := m.Match(context.Background(), trust.CallerRequest{Authorization: []string{"Bearer " + bad}}); !errors.As(err, &ce) ||
		ce.Reason != trust.CredentialClaims {
		t.Errorf("numeric sub: %v, want a claims refusal", err)
	}
}

// TestCallersMissingCredential: no credential is missing only where an
// edge that admits the source wants one; elsewhere no edge matches.
func TestCallersMissingCredential(t *testing.T) {
	t.Parallel()
	m, err := trust.NewCallers([]trust.CallerRule{
		{Edge: "web", Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Tokens: []string{token1}},
		{Edge: "cron", Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Anonymous: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ce *trust.CredentialError
	_, err = m.Match(context.Background(), trust.CallerRequest{Source: netip.MustParseAddr("10.0.0.5")})
	if !errors.As(err, &ce) || ce.Reason != trust.CredentialMissing || ce.Edge != "web" || !strings.Contains(err.Error(), "no credential") {
		t.Errorf("from the web edge's network: %v", err)
	}
	if _, err := m.Match(context.Background(), trust.CallerRequest{Source: netip.MustParseAddr("192.0.2.1")}); !errors.Is(err, trust.ErrNoCallerEdge) {
		t.Errorf("from no edge's network: %v, want ErrNoCallerEdge", err)
	}
	if c, err := m.Match(context.Background(), trust.CallerRequest{Source: netip.MustParseAddr("127.0.0.1")}); err != nil || c.Edge != "cron" {
		t.Errorf("from the anonymous edge's network: %+v, %v", c, err)
	}
}
