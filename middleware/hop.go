package middleware

// Identity and hop count. At egress, Identity strips every Baton-* and
// signature header the agent sent (only a Baton sets them), and sets
// Baton-Agent to this Baton's agent and Baton-Hop to the hop of the inbound
// handoff Correlate tied the handoff to (correlate.go) plus one, or 1; past
// the edge's max_hops it answers 508 before anything leaves. At ingress,
// HopGuard reads Baton-Agent and Baton-Hop, answers 400 to a malformed value
// and 508 beyond the inbound edge's max_hops; the handling Handle begins
// keeps the hop for the agent's own handoffs. Both sit after Trace (they
// need the trace id) and, at egress, after Correlate and destination
// resolution. They cannot fail open: the handlings are in-process.

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/problem"
)

// Headers of the wire contract between Batons.
const (
	HeaderAgent          = "Baton-Agent"
	HeaderHop            = "Baton-Hop"
	HeaderSignature      = "Signature"
	HeaderSignatureInput = "Signature-Input"
)

// Identity is the egress identity and hop middleware. A handoff continues
// the hop of the handling Correlate tied it to (correlate.go).
func Identity(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := info(r)
		StripBatonHeaders(r.Header)
		if !in.Handoff() {
			next.ServeHTTP(w, r)
			return
		}
		in.Uncorrelated = in.Handling == nil && in.Correlation == ""
		if in.Uncorrelated {
			in.Hop = 1
		}
		if c := compensationOf(r.Context()); c != nil {
			// Baton's own handoff, in the trace it compensates.
			in.Compensation, in.Uncorrelated = c, false
			r.Header.Set(HeaderCompensates, c.Of)
		}
		if in.MaxHops > 0 && in.Hop > in.MaxHops {
			hopLimit(w, r, in)
			return
		}
		setHeaderPair(r.Header, HeaderAgent, in.Agent, HeaderHop, strconv.Itoa(in.Hop))
		if h := in.Handling; h != nil && h.Budget.Set() {
			r.Header.Set(HeaderChainBudget, h.Budget.String()) // the chain's, carried on
		}
		next.ServeHTTP(w, r)
	})
}

// hopLimit refuses an outbound handoff past its edge's max_hops.
func hopLimit(w http.ResponseWriter, r *http.Request, in *Info) {
	in.PolicyDenial = DenialHopLimit
	problem.New(r, problem.HopLimit, "handoff "+in.Edge()+" would be hop "+
		strconv.Itoa(in.Hop)+", beyond the edge's max_hops of "+strconv.Itoa(in.MaxHops)).
		With("hop", in.Hop).With("max_hops", in.MaxHops).Write(w)
}

// setHeaderPair sets two headers with one allocation: their values share a
// backing array, each capped at its own element so that appending to one
// never writes into the other (net/textproto shares one the same way among
// the headers it reads). Both names must be canonical.
func setHeaderPair(h http.Header, k1, v1, k2, v2 string) {
	vs := []string{v1, v2}
	h[k1], h[k2] = vs[:1:1], vs[1:2:2]
}

// StripBatonHeaders removes every header only a Baton may set.
func StripBatonHeaders(h http.Header) {
	for k := range h {
		if len(k) > 6 && strings.EqualFold(k[:6], "baton-") {
			delete(h, k)
		}
	}
	h.Del(HeaderSignature)
	h.Del(HeaderSignatureInput)
}

// HopGuard returns the ingress hop middleware. maxHops gives the limit of the
// inbound edge from a sender.
func HopGuard(maxHops func(from string) int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			in.To = in.Agent
			from, ok := singleHeader(r.Header, HeaderAgent)
			if !ok || (from != "" && !ValidAgentName(from)) {
				problem.Write(w, r, problem.BadRequest, "Baton-Agent must be one agent name")
				return
			}
			in.From = from
			hop, ok := parseHop(r.Header)
			if !ok {
				problem.Write(w, r, problem.BadHop, "Baton-Hop must be one integer between 1 and 9999")
				return
			}
			in.Hop = hop
			in.MaxHops = maxHops(from)
			if hop > in.MaxHops {
				in.PolicyDenial = DenialHopLimit
				problem.New(r, problem.HopLimit, "handoff "+in.Edge()+" arrived at hop "+
					strconv.Itoa(hop)+", beyond the edge's max_hops of "+strconv.Itoa(in.MaxHops)).
					With("hop", hop).With("max_hops", in.MaxHops).Write(w)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// parseHop reads Baton-Hop; absent means 1 (a caller without a Baton).
func parseHop(h http.Header) (int, bool) {
	v, ok := singleHeader(h, HeaderHop)
	if !ok {
		return 0, false
	}
	if v == "" {
		return 1, true
	}
	if len(v) > 4 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 {
		return 0, false
	}
	return n, true
}

// singleHeader returns the one value of a header; ok is false when it is
// repeated. An absent header is "", true.
func singleHeader(h http.Header, name string) (string, bool) {
	vs := h[name]
	switch len(vs) {
	case 0:
		return "", true
	case 1:
		return strings.TrimSpace(vs[0]), true
	}
	return "", false
}

// ValidAgentName reports whether s has the shape of an agent name.
func ValidAgentName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}
