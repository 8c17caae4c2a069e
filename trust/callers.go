package trust

// Callers that run no Baton: a chain's entry agent takes work from clients
// (a web front end, a scheduler, another team's service) that send no
// Baton-Agent and no signature. An inbound edge with callers names them:
// its rule says from which networks they may come and with which
// credential, a bearer token or a JWT, or none. Callers.Match checks a
// request against the rules in order; the first that matches gives the
// caller its edge's name. The checks are pure but for the key set a JWT is
// checked against (KeySource) and the clock.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTLeeway is the clock skew allowed on a caller's JWT's exp, nbf and iat.
const JWTLeeway = 60 * time.Second

// maxSubject bounds the subject a record keeps of a caller's JWT.
const maxSubject = 128

// How a caller was identified (Caller.Via).
const (
	CallerJWT       = "jwt"
	CallerBearer    = "bearer"
	CallerNetwork   = "network"   // anonymous, from a listed network
	CallerAnonymous = "anonymous" // anonymous, from anywhere
)

// Reasons a credential is refused (CredentialError.Reason), stable for
// problem documents.
const (
	CredentialScheme      = "scheme"        // not Authorization: Bearer <token>
	CredentialBadToken    = "bad_token"     // not one of the bearer tokens, and not a valid JWT
	CredentialMalformed   = "malformed"     // not a JWT
	CredentialSignature   = "bad_signature" // signature or algorithm refused
	CredentialUnknownKey  = "unknown_key"   // no key with the token's kid
	CredentialExpired     = "expired"       // exp passed
	CredentialNotYetValid = "not_yet_valid" // nbf or iat in the future
	CredentialAudience    = "audience"      // aud does not name the edge's audience
	CredentialIssuer      = "issuer"        // iss is not the edge's issuer
	CredentialClaims      = "claims"        // another claim refused (exp missing, say)
	CredentialNoKeys      = "keys_unavailable"
	CredentialMissing     = "missing" // none presented where an edge needs one
)

// CallerRule is one inbound edge for callers that run no Baton.
type CallerRule struct {
	// Edge is the edge's from: the name the caller gets.
	Edge string
	// Networks the connection's source address must be in; none: any.
	Networks []netip.Prefix
	// Tokens are the bearer tokens accepted (nil: no bearer credential).
	Tokens []string
	// JWT checks a JWT credential (nil: none).
	JWT *JWTRule
	// Anonymous admits callers with no credential.
	Anonymous bool
	// Forward leaves the verified credential in the request for the agent.
	Forward bool
	// ClaimHeaders pass claims of a verified JWT to the agent.
	ClaimHeaders []ClaimHeader
}

// JWTRule is what a caller's JWT must satisfy: signed (RS256, ES256 or
// EdDSA) by a key of Keys, issued by Issuer for Audience, within its exp,
// nbf and iat (JWTLeeway allowed). An exp is required.
type JWTRule struct {
	Issuer, Audience string
	Keys             KeySource
}

// Caller is a caller that runs no Baton, as a rule named it.
type Caller struct {
	// Edge is the name it gets: its edge's from.
	Edge string
	// Via is how it was identified: jwt, bearer, network or anonymous.
	Via string
	// Subject is the JWT's sub (jwt) or the source address (network).
	Subject string
	// Forward: the credential that identified it goes on to the agent;
	// otherwise it is removed from the request.
	Forward bool
	// Headers are the claim headers of its edge with their values, for
	// the claims its JWT has (ClaimHeader).
	Headers [][2]string
}

// String renders the caller for records: "jwt:<sub>", "bearer",
// "network:<ip>" or "anonymous".
func (c *Caller) String() string {
	if c == nil {
		return ""
	}
	if c.Subject != "" {
		return c.Via + ":" + c.Subject
	}
	return c.Via
}

// Anonymous reports whether the caller presented no credential.
func (c *Caller) Anonymous() bool {
	return c != nil && (c.Via == CallerNetwork || c.Via == CallerAnonymous)
}

// CallerRequest is what Match needs of a request.
type CallerRequest struct {
	// Source is the connection's remote address.
	Source netip.Addr
	// Authorization holds the request's Authorization header values.
	Authorization []string
}

// ErrNoCallerEdge is Match's answer when no rule matched and no credential
// was refused (none was presented, or the source is in no rule's networks).
var ErrNoCallerEdge = errors.New("no inbound edge for callers that run no Baton matches the request")

// CredentialError is Match's answer when no rule matched and a credential
// was presented and refused.
type CredentialError struct {
	Edge   string // the edge whose check refused it last
	Reason string // one of the Credential* reasons
	Err    error
}

func (e *CredentialError) Error() string {
	if e.Reason == CredentialMissing {
		return "no credential for the edge from " + quoteForError(e.Edge) + ", which needs one"
	}
	return "credential refused for the edge from " + quoteForError(e.Edge) + ": " + e.Err.Error()
}

func (e *CredentialError) Unwrap() error { return e.Err }

// Callers matches callers that run no Baton against the rules.
type Callers struct {
	rules []callerRule
	now   func() time.Time
}

type callerRule struct {
	CallerRule
	tokens [][sha256.Size]byte
	parser *jwt.Parser
}

// NewCallers builds the matcher; now is the clock (nil: time.Now). The error
// names every bad rule.
func NewCallers(rules []CallerRule, now func() time.Time) (*Callers, error) {
	if now == nil {
		now = time.Now
	}
	c := &Callers{now: now}
	var errs []error
	for i, r := range rules {
		at := fmt.Sprintf("callers[%d] (%s)", i, quoteForError(r.Edge))
		if r.Edge == "" {
			errs = append(errs, fmt.Errorf("%s: no edge name", at))
		}
		if !r.Anonymous && r.Tokens == nil && r.JWT == nil {
			errs = append(errs, fmt.Errorf("%s: no credential and not anonymous: nobody could match", at))
		}
		cr := callerRule{CallerRule: r}
		for j, t := range r.Tokens {
			if t == "" {
				errs = append(errs, fmt.Errorf("%s: token %d is empty", at, j))
			}
			cr.tokens = append(cr.tokens, sha256.Sum256([]byte(t)))
		}
		if j := r.JWT; j != nil {
			if j.Issuer == "" || j.Audience == "" || j.Keys == nil {
				errs = append(errs, fmt.Errorf("%s: a JWT check needs an issuer, an audience and keys", at))
			}
			cr.parser = jwt.NewParser(jwt.WithValidMethods(jwtAlgs), jwt.WithLeeway(JWTLeeway),
				jwt.WithIssuer(j.Issuer), jwt.WithAudience(j.Audience), jwt.WithIssuedAt(),
				jwt.WithExpirationRequired(), jwt.WithTimeFunc(now))
		}
		c.rules = append(c.rules, cr)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// Match names the caller of q by the first rule it matches: its source is
// in the rule's networks (when the rule lists any), and the rule is
// anonymous or one of its credentials checks out. No match is
// ErrNoCallerEdge, or a *CredentialError when a credential was presented
// and refused by a rule whose networks admitted the source: the most
// telling refusal, the first of those alike (wrapping ErrKeysUnavailable
// when a JWT could not be checked for want of keys).
func (c *Callers) Match(ctx context.Context, q CallerRequest) (*Caller, error) {
	token, scheme, presented := bearerToken(q.Authorization)
	var (
		refused *CredentialError
		needed  string // the first edge admitting the source that wants a credential
	)
	for i := range c.rules {
		r := &c.rules[i]
		if !inNetworks(r.Networks, q.Source) {
			continue
		}
		if r.Anonymous {
			if len(r.Networks) > 0 {
				return &Caller{Edge: r.Edge, Via: CallerNetwork, Subject: q.Source.Unmap().String()}, nil
			}
			return &Caller{Edge: r.Edge, Via: CallerAnonymous}, nil
		}
		if !presented {
			if needed == "" && !r.Anonymous {
				needed = r.Edge
			}
			continue
		}
		if !scheme {
			if refused == nil {
				refused = &CredentialError{Edge: r.Edge, Reason: CredentialScheme,
					Err: errors.New("the Authorization header is not one Bearer token")}
			}
			continue
		}
		if r.tokens != nil && tokenIn(r.tokens, token) {
			return &Caller{Edge: r.Edge, Via: CallerBearer, Forward: r.Forward}, nil
		}
		if r.JWT == nil {
			if refused == nil {
				refused = &CredentialError{Edge: r.Edge, Reason: CredentialBadToken, Err: errors.New("the bearer token is not accepted")}
			}
			continue
		}
		claims, err := r.checkJWT(ctx, token)
		if err == nil {
			return &Caller{Edge: r.Edge, Via: CallerJWT, Subject: subject(claims), Forward: r.Forward,
				Headers: claimHeaders(r.ClaimHeaders, claims)}, nil
		}
		if refused == nil || telling(err.Reason) > telling(refused.Reason) {
			refused = err
		}
	}
	if refused != nil {
		return nil, refused
	}
	if needed != "" {
		return nil, &CredentialError{Edge: needed, Reason: CredentialMissing,
			Err: errors.New("no credential: send Authorization: Bearer <token>")}
	}
	return nil, ErrNoCallerEdge
}

// IdentityHeaders returns the claim headers of every rule, canonical and
// each once: no request may bring them itself.
func (c *Callers) IdentityHeaders() []string {
	var out []string
	for _, r := range c.rules {
		for _, h := range r.ClaimHeaders {
			if !slices.Contains(out, h.Header) {
				out = append(out, h.Header)
			}
		}
	}
	return out
}

// telling ranks a refusal's reason by how much it tells the caller, when
// several edges refused one credential: a token whose signature verified
// names the claim that failed; one whose keys could not be had may pass
// later; a signature that does not verify says more than a key or a token
// the edge does not know.
func telling(reason string) int {
	switch reason {
	case CredentialExpired, CredentialNotYetValid, CredentialAudience, CredentialIssuer, CredentialClaims:
		return 4
	case CredentialNoKeys:
		return 3
	case CredentialSignature:
		return 2
	}
	return 1
}

// bearerToken reads the one Authorization header: presented when there is
// any, scheme when it is "Bearer <token>".
func bearerToken(vs []string) (token string, scheme, presented bool) {
	if len(vs) == 0 {
		return "", false, false
	}
	if len(vs) > 1 {
		return "", false, true
	}
	s, t, ok := strings.Cut(strings.TrimSpace(vs[0]), " ")
	t = strings.TrimSpace(t)
	if !ok || !strings.EqualFold(s, "Bearer") || t == "" || strings.ContainsAny(t, " \t") {
		return "", false, true
	}
	return t, true, true
}

func inNetworks(nets []netip.Prefix, a netip.Addr) bool {
	if len(nets) == 0 {
		return true
	}
	a = a.Unmap()
	for _, p := range nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// tokenIn compares token with every accepted one in constant time: digests
// of equal length, all of them compared, so that neither a token's length
// nor which one matched shows in the time taken.
func tokenIn(tokens [][sha256.Size]byte, token string) bool {
	d := sha256.Sum256([]byte(token))
	ok := 0
	for i := range tokens {
		ok |= subtle.ConstantTimeCompare(tokens[i][:], d[:])
	}
	return ok == 1
}

// checkJWT verifies token against the rule and returns its claims.
func (r *callerRule) checkJWT(ctx context.Context, token string) (jwt.MapClaims, *CredentialError) {
	claims := jwt.MapClaims{}
	var keysErr error
	_, err := r.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		set, err := r.JWT.Keys.KeySet(ctx, kid)
		if err != nil {
			keysErr = err
			return nil, err
		}
		keys := set.Find(kid, t.Method.Alg())
		if len(keys) == 0 {
			if kid == "" {
				return nil, fmt.Errorf("%w: no %s key, and the token names no kid", errUnknownJWTKey, t.Method.Alg())
			}
			return nil, fmt.Errorf("%w: no %s key with kid %q", errUnknownJWTKey, t.Method.Alg(), kid)
		}
		vs := make([]jwt.VerificationKey, len(keys))
		for i, k := range keys {
			vs[i] = k
		}
		return jwt.VerificationKeySet{Keys: vs}, nil
	})
	if err == nil {
		if sub, ok := claims["sub"]; ok {
			if _, ok := sub.(string); !ok {
				return nil, &CredentialError{Edge: r.Edge, Reason: CredentialClaims,
					Err: errors.New("jwt: token has invalid claims: sub is not a string")}
			}
		}
		return claims, nil
	}
	ce := &CredentialError{Edge: r.Edge, Err: fmt.Errorf("jwt: %w", err)}
	switch {
	case keysErr != nil:
		ce.Reason = CredentialNoKeys
	case errors.Is(err, errUnknownJWTKey):
		ce.Reason = CredentialUnknownKey
	case errors.Is(err, jwt.ErrTokenMalformed):
		ce.Reason = CredentialMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		ce.Reason = CredentialSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		ce.Reason = CredentialExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		ce.Reason = CredentialNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		ce.Reason = CredentialAudience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		ce.Reason = CredentialIssuer
	default:
		ce.Reason = CredentialClaims
	}
	return nil, ce
}

var errUnknownJWTKey = errors.New("unknown signing key")
