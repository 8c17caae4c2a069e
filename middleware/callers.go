package middleware

// Callers names, at ingress, a caller that runs no Baton: a request with no
// Baton-Agent and no signature is matched against the inbound edges that
// have callers (trust.Callers: source network, then a bearer token, a JWT,
// or none). The first edge that matches names the sender: the request
// goes on as a handoff from that edge (Baton-Agent set to its name, which
// HopGuard reads, so that dedupe scope, records, metrics, limits and the
// edge's policy are that edge's), at hop 1: every Baton-* header the
// caller sent is removed, as only a Baton sets them. The credential the
// edge verified is removed too, unless the edge forwards it (an agent logs
// requests, quotes them into prompts and hands work on): the agent gets
// the caller's verified identity instead, in Baton-Caller (how it was
// identified), Baton-Caller-Subject (the JWT's sub) and the edge's claim
// headers, which Baton removes from every request before it sets them. A
// request that carries Baton-Agent or a signature is a Baton's and passes
// (without claim headers): it is never matched to a callers edge.
//
// It sits after Trace and Limit, right before Verify, which applies the
// named edge's policy (and refuses a Baton that claims a callers edge's
// name). It fails closed: no credential where an edge admitting the
// source needs one is 401 missing-credential with a Bearer challenge
// (RFC 6750); a credential presented and refused is 401 bad-credential
// with an invalid_token challenge; no edge matching otherwise is 403
// policy-denied (no_edge), as for any sender without an edge; a JWT that
// cannot be checked because its issuer's keys were never fetched is 503
// not-ready. When no edge has callers it is not in the chain at all.

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/trust"
)

// CallerMatcher names a caller that runs no Baton (trust.Callers).
type CallerMatcher interface {
	Match(ctx context.Context, q trust.CallerRequest) (*trust.Caller, error)
}

// Headers that give the agent its caller's verified identity.
const (
	// HeaderCaller says how a caller that runs no Baton was identified:
	// jwt, bearer, network or anonymous.
	HeaderCaller = "Baton-Caller"
	// HeaderCallerSubject is the subject of its JWT, or its address when
	// a network named it.
	HeaderCallerSubject = "Baton-Caller-Subject"
)

// Policy denial reasons of callers.
const (
	// DenialBadCredential: a credential presented and refused.
	DenialBadCredential = "bad_credential"
	// DenialMissingCredential: none presented where one is needed.
	DenialMissingCredential = "missing_credential"
)

// CallersOptions configure Callers.
type CallersOptions struct {
	// Matcher names callers; nil (no callers edges): Callers is not in
	// the chain.
	Matcher CallerMatcher
	// Realm is the realm of the Bearer challenge: this Baton's agent.
	Realm string
	// IdentityHeaders are the claim headers of every callers edge,
	// canonical: removed from every request before Baton sets them.
	IdentityHeaders []string
}

// Callers returns the ingress middleware that names callers that run no
// Baton.
func Callers(o CallersOptions) func(http.Handler) http.Handler {
	challenge := `Bearer realm=` + strconv.Quote(o.Realm)
	return func(next http.Handler) http.Handler {
		if o.Matcher == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := r.Header
			for _, k := range o.IdentityHeaders {
				delete(h, k)
			}
			if len(h[HeaderAgent]) > 0 || len(h[HeaderSignature]) > 0 || len(h[HeaderSignatureInput]) > 0 {
				next.ServeHTTP(w, r) // a Baton's handoff
				return
			}
			in := info(r)
			src := sourceAddr(r)
			c, err := o.Matcher.Match(r.Context(), trust.CallerRequest{Source: src, Authorization: h["Authorization"]})
			if err != nil {
				refuseCaller(w, r, in, src, err, challenge)
				return
			}
			if vs := h[HeaderChainBudget]; len(vs) > 0 {
				in.budgetHeader = strings.Join(vs, ",")
			}
			StripBatonHeaders(h)
			h.Set(HeaderAgent, c.Edge)
			h.Set(HeaderCaller, c.Via)
			if c.Subject != "" {
				h.Set(HeaderCallerSubject, c.Subject)
			}
			for _, kv := range c.Headers {
				h[kv[0]] = []string{kv[1]}
			}
			if !c.Anonymous() && !c.Forward {
				delete(h, "Authorization") // verified here; the agent has the identity
			}
			in.Caller = c
			next.ServeHTTP(w, r)
		})
	}
}

// refuseCaller answers a caller no edge named.
func refuseCaller(w http.ResponseWriter, r *http.Request, in *Info, src netip.Addr, err error, challenge string) {
	in.Err = err
	var ce *trust.CredentialError
	switch {
	case errors.As(err, &ce) && ce.Reason == trust.CredentialNoKeys:
		w.Header().Set("Retry-After", "1")
		problem.Write(w, r, problem.NotReady, "the caller's token cannot be checked yet: its issuer's signing keys have not been fetched")
	case errors.As(err, &ce) && ce.Reason == trust.CredentialMissing:
		// RFC 6750 section 3.1: no error code when no credential came.
		in.PolicyDenial = DenialMissingCredential
		w.Header().Set("WWW-Authenticate", challenge)
		problem.Write(w, r, problem.MissingCredential,
			"this agent's callers authenticate: send Authorization: Bearer <token>")
	case errors.As(err, &ce):
		in.PolicyDenial = DenialBadCredential
		c := challenge
		if ce.Reason != trust.CredentialScheme {
			c += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", c)
		problem.New(r, problem.BadCredential, ce.Err.Error()).With("reason", ce.Reason).Write(w)
	default:
		from := "an unknown address"
		if src.IsValid() {
			from = src.Unmap().String()
		}
		policyDenied(w, r, trust.DecisionNoEdge, "no inbound edge for callers that run no Baton admits this request (from "+from+")")
	}
}

// sourceAddr is the address of the connection's other end.
func sourceAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
