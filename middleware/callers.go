package middleware

// Callers names, at ingress, a caller that runs no Baton: a request with no
// Baton-Agent and no signature is matched against the inbound edges that
// have callers (trust.Callers: source network, then a bearer token, a JWT,
// or none). The first edge that matches names the sender: the request
// goes on as a handoff from that edge (Baton-Agent set to its name, which
// HopGuard reads, so that dedupe scope, records, metrics, limits and the
// edge's policy are that edge's), at hop 1: every Baton-* header the
// caller sent is removed, as only a Baton sets them. Authorization passes
// to the agent untouched. A request that carries Baton-Agent or a
// signature is a Baton's and passes untouched: it is never matched to a
// callers edge.
//
// It sits after Trace and Limit, right before Verify, which applies the
// named edge's policy (and refuses a Baton that claims a callers edge's
// name). It fails closed: no edge matching is 403 policy-denied (no_edge),
// as for any sender without an edge; a credential presented and refused is
// 401 bad-credential with a Bearer challenge; a JWT that cannot be checked
// because its issuer's keys were never fetched is 503 not-ready. When no
// edge has callers it is not in the chain at all.

import (
	"context"
	"errors"
	"net/http"
	"net/netip"

	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/trust"
)

// CallerMatcher names a caller that runs no Baton (trust.Callers).
type CallerMatcher interface {
	Match(ctx context.Context, q trust.CallerRequest) (*trust.Caller, error)
}

// DenialBadCredential is the policy denial reason of a caller whose
// credential was refused.
const DenialBadCredential = "bad_credential"

// Callers returns the ingress middleware that names callers that run no
// Baton; a nil m (no callers edges) returns next as it is.
func Callers(m CallerMatcher) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if m == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := r.Header
			if len(h[HeaderAgent]) > 0 || len(h[HeaderSignature]) > 0 || len(h[HeaderSignatureInput]) > 0 {
				next.ServeHTTP(w, r) // a Baton's handoff
				return
			}
			in := info(r)
			src := sourceAddr(r)
			c, err := m.Match(r.Context(), trust.CallerRequest{Source: src, Authorization: h["Authorization"]})
			if err != nil {
				refuseCaller(w, r, in, src, err)
				return
			}
			StripBatonHeaders(h)
			h.Set(HeaderAgent, c.Edge)
			in.Caller = c
			next.ServeHTTP(w, r)
		})
	}
}

// refuseCaller answers a caller no edge named.
func refuseCaller(w http.ResponseWriter, r *http.Request, in *Info, src netip.Addr, err error) {
	in.Err = err
	var ce *trust.CredentialError
	switch {
	case errors.As(err, &ce) && ce.Reason == trust.CredentialNoKeys:
		w.Header().Set("Retry-After", "1")
		problem.Write(w, r, problem.NotReady, "the caller's token cannot be checked yet: its issuer's signing keys have not been fetched")
	case errors.As(err, &ce):
		in.PolicyDenial = DenialBadCredential
		challenge := `Bearer realm="baton"`
		if ce.Reason != trust.CredentialScheme {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
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
