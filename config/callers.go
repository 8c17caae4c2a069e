package config

import (
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Callers makes an inbound edge the edge of callers that run no Baton (a
// web front end, a scheduler, another team's service): requests that carry
// no Baton-Agent and no signature, matched by their source network and a
// credential (docs/trust.md#callers-that-run-no-baton). The edge's from is
// the name they get.
type Callers struct {
	// Networks are the CIDRs the connection's source address must be in;
	// none: any.
	Networks []string `yaml:"networks"`
	// Bearer accepts Authorization: Bearer <token> with one of a list of
	// tokens.
	Bearer *Bearer `yaml:"bearer"`
	// JWT accepts Authorization: Bearer <JWT> signed by the issuer's keys.
	JWT *JWT `yaml:"jwt"`
	// Anonymous admits callers with no credential (Networks may still
	// restrict them); their content is untrusted unless the edge's
	// posture says otherwise.
	Anonymous bool `yaml:"anonymous"`
	// Forward passes the credential the edge verified on to the agent in
	// Authorization; by default it is removed, and the agent gets the
	// caller's verified identity instead (Baton-Caller, ...).
	Forward bool `yaml:"forward"`
	// ClaimHeaders gives the agent chosen claims of the caller's JWT, each
	// in a header of its own: header name → claim name (a dot path for a
	// nested claim). Baton removes these headers from every request it
	// receives before it sets them, so the agent can trust them.
	ClaimHeaders map[string]string `yaml:"claim_headers"`

	// ParsedNetworks is Networks parsed by Validate.
	ParsedNetworks []netip.Prefix `yaml:"-"`
}

// Bearer names where a callers edge's bearer tokens are.
type Bearer struct {
	// TokensEnv names the environment variable holding the tokens,
	// comma-separated, each at least MinCallerToken characters.
	TokensEnv string `yaml:"tokens_env"`
}

// JWT is what a caller's JSON Web Token must satisfy: signed (RS256, ES256
// or EdDSA) by a key of the issuer's key set, from JWKSFile or JWKSURL,
// with this issuer and audience.
type JWT struct {
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
	// JWKSFile is a JWK Set file, read again when it changes.
	JWKSFile string `yaml:"jwks_file"`
	// JWKSURL is a JWK Set URL, fetched at start and every 5 minutes.
	JWKSURL string `yaml:"jwks_url"`

	// ParsedJWKSURL is JWKSURL parsed by Validate.
	ParsedJWKSURL *url.URL `yaml:"-"`
}

// MinCallerToken is the shortest bearer token a callers edge accepts.
const MinCallerToken = 16

// envName is the shape of an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CallerEdges returns the inbound edges with callers, in config order.
func (c *Config) CallerEdges() []Edge {
	var out []Edge
	for _, e := range c.Edges {
		if e.Callers != nil && e.From != "" {
			out = append(out, e)
		}
	}
	return out
}

func (c *Config) validateCallers(bad badFunc) {
	for i, e := range c.Edges {
		k := e.Callers
		if k == nil {
			continue
		}
		path := fmt.Sprintf("edges[%d].callers", i)
		if e.To != "" {
			bad(path, nil, "applies to inbound edges (from) only: it names callers that run no Baton and send to this agent")
			continue
		}
		if e.From != "" {
			if _, ok := c.Peers[e.From]; ok {
				bad(fmt.Sprintf("edges[%d].from", i), e.From, "must not name a peer: a peer runs a Baton, callers edges are for callers that run none; rename the edge")
			}
			if _, ok := c.Trust.Peers[e.From]; ok {
				bad(fmt.Sprintf("edges[%d].from", i), e.From, "must not name an agent in trust.peers: it runs a Baton, callers edges are for callers that run none; rename the edge")
			}
		}
		if e.RequireSignature != nil && *e.RequireSignature {
			bad(fmt.Sprintf("edges[%d].require_signature", i), true, "must not be true with callers: callers that run no Baton sign nothing; remove it")
		}
		switch {
		case !k.Anonymous && k.Bearer == nil && k.JWT == nil:
			bad(path, nil, "must set bearer, jwt or anonymous: true (with networks, anonymous: true admits any caller from them)")
		case k.Anonymous && (k.Bearer != nil || k.JWT != nil):
			bad(path+".anonymous", true, "must not be set with bearer or jwt: an anonymous edge needs no credential; remove one or the other, or make two edges")
		}
		k.ParsedNetworks = k.ParsedNetworks[:0]
		for j, n := range k.Networks {
			p, err := netip.ParsePrefix(n)
			switch {
			case err != nil:
				bad(fmt.Sprintf("%s.networks[%d]", path, j), n, "must be a CIDR such as 10.0.0.0/8 or 127.0.0.1/32")
			case p != p.Masked():
				bad(fmt.Sprintf("%s.networks[%d]", path, j), n, "must be a network address: write "+p.Masked().String())
			default:
				k.ParsedNetworks = append(k.ParsedNetworks, p)
			}
		}
		if b := k.Bearer; b != nil {
			switch {
			case b.TokensEnv == "":
				bad(path+".bearer.tokens_env", nil, "must name the environment variable holding the comma-separated tokens, like WEB_TOKENS")
			case !envName.MatchString(b.TokensEnv):
				bad(path+".bearer.tokens_env", b.TokensEnv, "must be an environment variable's name (letters, digits, _), like WEB_TOKENS")
			}
		}
		if j := k.JWT; j != nil {
			validateCallerJWT(bad, path+".jwt", j)
		}
		if k.Forward && k.Anonymous {
			bad(path+".forward", true, "must not be set on an anonymous edge: it verifies no credential, so there is none to forward "+
				"(a caller's own Authorization reaches the agent as sent); remove it")
		}
		validateClaimHeaders(bad, path, k)
	}
}

// reservedHeaders are the headers claim_headers may not name: HTTP's own,
// credentials, and the wire contract between Batons (Baton-* is refused by
// its prefix).
var reservedHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Set-Cookie": true,
	"Host": true, "Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Proxy-Connection": true, "Expect": true,
	"Content-Length": true, "Content-Type": true, "Content-Encoding": true, "Content-Digest": true,
	"Traceparent": true, "Tracestate": true, "Baggage": true, "Idempotency-Key": true,
	"Signature": true, "Signature-Input": true, "Forwarded": true, "X-Forwarded-For": true,
}

// headerName is an HTTP field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

func validateClaimHeaders(bad badFunc, path string, k *Callers) {
	if len(k.ClaimHeaders) == 0 {
		return
	}
	if k.JWT == nil {
		bad(path+".claim_headers", nil, "needs jwt: only a JWT has claims to pass on; remove claim_headers or add jwt")
		return
	}
	seen := map[string]string{}
	for _, h := range slices.Sorted(maps.Keys(k.ClaimHeaders)) {
		at := path + ".claim_headers." + h
		canon := http.CanonicalHeaderKey(h)
		switch {
		case seen[canon] != "":
			bad(at, nil, "names the same header as "+seen[canon]+" (header names are case-insensitive): keep one")
		case !headerName.MatchString(h):
			bad(at, nil, "must be an HTTP header name (letters, digits and !#$%&'*+.^_`|~-), like X-Caller-Email")
		case len(canon) > 6 && strings.EqualFold(canon[:6], "baton-"):
			bad(at, nil, "must not be a Baton-* header: those are Baton's own; use a name like X-Caller-Email")
		case reservedHeaders[canon]:
			bad(at, nil, "must not be a header HTTP or Baton uses itself; use a name like X-Caller-Email")
		}
		seen[canon] = h
		if c := k.ClaimHeaders[h]; c == "" || strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".") || strings.Contains(c, "..") {
			bad(at, c, "must name a claim of the caller's JWT, like email or realm_access.roles (a dot path for a nested claim)")
		}
	}
}

func validateCallerJWT(bad badFunc, path string, j *JWT) {
	if j.Issuer == "" {
		bad(path+".issuer", nil, "must be set to the tokens' iss, like https://auth.example.com/")
	}
	if j.Audience == "" {
		bad(path+".audience", nil, "must be set to the aud the tokens must name (this agent, say)")
	}
	switch {
	case j.JWKSFile == "" && j.JWKSURL == "":
		bad(path, nil, "must set jwks_file or jwks_url: where the issuer's signing keys are")
	case j.JWKSFile != "" && j.JWKSURL != "":
		bad(path+".jwks_url", redact(j.JWKSURL), "must not be set with jwks_file: keep one")
	case j.JWKSFile != "":
		if f, err := os.Open(j.JWKSFile); err != nil {
			bad(path+".jwks_file", j.JWKSFile, "must be a readable file: "+err.Error())
		} else {
			f.Close()
		}
	default:
		u, err := parseHTTPURL(j.JWKSURL)
		switch {
		case err != nil:
			bad(path+".jwks_url", redact(j.JWKSURL), "must be the https URL of the issuer's JWK Set ("+err.Error()+")")
		case u.Scheme != "https" && !loopbackHost(u.Hostname()):
			bad(path+".jwks_url", redact(j.JWKSURL), "must be https (plain http only to a loopback address): keys fetched in the clear can be replaced on the way")
		default:
			j.ParsedJWKSURL = u
		}
	}
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
