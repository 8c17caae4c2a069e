package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCallersValid(t *testing.T) {
	t.Parallel()
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	in := minimal + "trust: {peers: {planner: [\"p-1 AAAA\"]}}\nedges:\n" +
		"  - {from: planner}\n" +
		"  - from: web\n    callers: {networks: [10.0.0.0/8, \"fd00::/8\"], bearer: {tokens_env: WEB_TOKENS}, jwt: {issuer: \"https://auth.example.com/\", audience: analyst, jwks_file: " + jwks + "}}\n" +
		"  - {from: cron, posture: trusted, callers: {networks: [127.0.0.1/32], anonymous: true}}\n" +
		"  - {from: app, callers: {jwt: {issuer: i, audience: a, jwks_url: \"https://auth.example.com/jwks.json\"}}}\n" +
		"  - {from: local, callers: {jwt: {issuer: i, audience: a, jwks_url: \"http://127.0.0.1:9999/jwks\"}}}\n"
	c, err := Parse(strings.NewReader(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	web := c.Edges[1].Callers
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	if !reflect.DeepEqual(web.ParsedNetworks, want) {
		t.Errorf("networks parsed as %v, want %v", web.ParsedNetworks, want)
	}
	if u := c.Edges[3].Callers.JWT.ParsedJWKSURL; u == nil || u.Host != "auth.example.com" {
		t.Errorf("jwks_url parsed as %v", u)
	}
	if got := len(c.CallerEdges()); got != 4 {
		t.Errorf("CallerEdges: %d, want 4", got)
	}
	// A bundle makes edges require signatures, but never a callers edge.
	if !c.RequiresSignature(c.Edges[0]) || c.RequiresSignature(c.Edges[1]) {
		t.Error("RequiresSignature: the planner edge must, the callers edge must not")
	}
}

func TestCallersInvalid(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "none.json")
	tests := []struct {
		name  string
		edges string
		want  []string
	}{
		{
			name:  "no credential",
			edges: "[{from: web, callers: {networks: [10.0.0.0/8]}}]",
			want:  []string{`edges[0].callers: must set bearer, jwt or anonymous: true (with networks, anonymous: true admits any caller from them)`},
		},
		{
			name:  "anonymous with a credential",
			edges: "[{from: web, callers: {anonymous: true, bearer: {tokens_env: T}}}]",
			want:  []string{`edges[0].callers.anonymous: must not be set with bearer or jwt: an anonymous edge needs no credential; remove one or the other, or make two edges, got true`},
		},
		{
			name:  "bad networks",
			edges: "[{from: web, callers: {anonymous: true, networks: [10.0.0.0/33, 10.0.0.1/8, 10.0.0.1, \"\"]}}]",
			want: []string{
				`edges[0].callers.networks[0]: must be a CIDR such as 10.0.0.0/8 or 127.0.0.1/32, got "10.0.0.0/33"`,
				`edges[0].callers.networks[1]: must be a network address: write 10.0.0.0/8, got "10.0.0.1/8"`,
				`edges[0].callers.networks[2]: must be a CIDR such as 10.0.0.0/8 or 127.0.0.1/32, got "10.0.0.1"`,
				`edges[0].callers.networks[3]: must be a CIDR such as 10.0.0.0/8 or 127.0.0.1/32, got ""`,
			},
		},
		{
			name:  "tokens_env",
			edges: "[{from: web, callers: {bearer: {}}}, {from: app, callers: {bearer: {tokens_env: \"WEB TOKENS\"}}}]",
			want: []string{
				`edges[0].callers.bearer.tokens_env: must name the environment variable holding the comma-separated tokens, like WEB_TOKENS`,
				`edges[1].callers.bearer.tokens_env: must be an environment variable's name (letters, digits, _), like WEB_TOKENS, got "WEB TOKENS"`,
			},
		},
		{
			name:  "jwt without issuer, audience or keys",
			edges: "[{from: web, callers: {jwt: {}}}]",
			want: []string{
				`edges[0].callers.jwt.issuer: must be set to the tokens' iss, like https://auth.example.com/`,
				`edges[0].callers.jwt.audience: must be set to the aud the tokens must name (this agent, say)`,
				`edges[0].callers.jwt: must set jwks_file or jwks_url: where the issuer's signing keys are`,
			},
		},
		{
			name:  "jwks file unreadable",
			edges: "[{from: web, callers: {jwt: {issuer: i, audience: a, jwks_file: " + missing + "}}}]",
			want: []string{
				`edges[0].callers.jwt.jwks_file: must be a readable file: open ` + missing + `: no such file or directory, got "` + missing + `"`,
			},
		},
		{
			name: "jwks url",
			edges: "[{from: a, callers: {jwt: {issuer: i, audience: a, jwks_url: \"http://auth.example.com/jwks\"}}}," +
				" {from: d, callers: {jwt: {issuer: i, audience: a, jwks_url: \"auth.example.com/jwks\"}}}," +
				" {from: c, callers: {jwt: {issuer: i, audience: a, jwks_url: \"https://x/\", jwks_file: /etc/x}}}]",
			want: []string{
				`edges[0].callers.jwt.jwks_url: must be https (plain http only to a loopback address): keys fetched in the clear can be replaced on the way, got "http://auth.example.com/jwks"`,
				`edges[1].callers.jwt.jwks_url: must be the https URL of the issuer's JWK Set (no http:// or https://), got "auth.example.com/jwks"`,
				`edges[2].callers.jwt.jwks_url: must not be set with jwks_file: keep one, got "https://x/"`,
			},
		},
		{
			name:  "an outbound edge",
			edges: "[{to: b, callers: {anonymous: true}}]",
			want:  []string{`edges[0].callers: applies to inbound edges (from) only: it names callers that run no Baton and send to this agent`},
		},
		{
			name:  "the name of a peer, of a bundle's agent, or of another edge",
			edges: "[{from: b, callers: {anonymous: true}}, {from: planner, callers: {anonymous: true}}, {from: web, callers: {anonymous: true}}, {from: web}]",
			want: []string{
				`edges[3].from: must not repeat edges[2], got "web"`,
				`edges[0].from: must not name a peer: a peer runs a Baton, callers edges are for callers that run none; rename the edge, got "b"`,
				`edges[1].from: must not name an agent in trust.peers: it runs a Baton, callers edges are for callers that run none; rename the edge, got "planner"`,
			},
		},
		{
			name:  "forward on an anonymous edge",
			edges: "[{from: web, callers: {anonymous: true, forward: true}}]",
			want: []string{`edges[0].callers.forward: must not be set on an anonymous edge: it verifies no credential, so there is none to forward ` +
				`(a caller's own Authorization reaches the agent as sent); remove it, got true`},
		},
		{
			name:  "claim headers without a JWT",
			edges: "[{from: web, callers: {bearer: {tokens_env: T}, claim_headers: {X-Caller-Email: email}}}]",
			want:  []string{`edges[0].callers.claim_headers: needs jwt: only a JWT has claims to pass on; remove claim_headers or add jwt`},
		},
		{
			name: "claim headers Baton or HTTP uses, twice, or naming no claim",
			edges: "[{from: web, callers: {jwt: {issuer: i, audience: a, jwks_url: \"https://x/\"}, claim_headers: " +
				"{Baton-Caller-Subject: sub, authorization: sub, \"X Email\": email, x-team: team, X-Team: team, X-Roles: \"realm..roles\"}}}]",
			want: []string{
				`edges[0].callers.claim_headers.Baton-Caller-Subject: must not be a Baton-* header: those are Baton's own; use a name like X-Caller-Email`,
				`edges[0].callers.claim_headers.X Email: must be an HTTP header name (letters, digits and !#$%&'*+.^_` + "`" + `|~-), like X-Caller-Email`,
				`edges[0].callers.claim_headers.X-Roles: must name a claim of the caller's JWT, like email or realm_access.roles (a dot path for a nested claim), got "realm..roles"`,
				`edges[0].callers.claim_headers.authorization: must not be a header HTTP or Baton uses itself; use a name like X-Caller-Email`,
				`edges[0].callers.claim_headers.x-team: names the same header as X-Team (header names are case-insensitive): keep one`,
			},
		},
		{
			name:  "require_signature",
			edges: "[{from: web, require_signature: true, callers: {anonymous: true}}]",
			want:  []string{`edges[0].require_signature: must not be true with callers: callers that run no Baton sign nothing; remove it, got true`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := minimal + "peers: {b: {url: http://127.0.0.1:1}}\ntrust: {peers: {planner: [\"p-1 AAAA\"]}}\nedges: " + tt.edges + "\n"
			c, err := Parse(strings.NewReader(in), nil)
			if err == nil {
				t.Fatalf("Parse succeeded, want %q\n%s", tt.want, dump(c))
			}
			if got := lines(err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse error lines\n got: %q\nwant: %q", got, tt.want)
			}
			assertFieldErrors(t, err)
		})
	}
}
