package trust

// Edge policy: may this handoff cross this edge, and how far is what crosses
// it trusted? Pure: the lead builds a Policy from the configuration once and
// asks it per request; nothing here reads config, the store or the clock.

import (
	"errors"
	"fmt"
)

// Posture is how far a Baton trusts what arrives over an edge.
type Posture string

const (
	// Trusted: the peer's trust labels on its payload are kept as sent.
	Trusted Posture = "trusted"
	// Evaluate: the payload is delivered marked for the agent to evaluate
	// before acting on it; the peer's "trusted" labels are not taken as is.
	Evaluate Posture = "evaluate"
	// Untrusted: the whole payload is labelled untrusted content.
	Untrusted Posture = "untrusted"
)

// DefaultPosture applies to an edge that names none.
const DefaultPosture = Evaluate

// Valid reports whether p is one of the three postures.
func (p Posture) Valid() bool { return p == Trusted || p == Evaluate || p == Untrusted }

// EdgeRule is one configured edge as the policy needs it: the peer at its
// other end, its posture, and whether handoffs over it must be signed.
type EdgeRule struct {
	Peer             string
	Posture          Posture // "" means DefaultPosture
	RequireSignature bool
	// Callers marks an inbound edge for callers that run no Baton
	// (callers.go): only a Caller its rule named may cross it, and only
	// such an edge admits a Caller.
	Callers bool

	postureSet bool // Posture was configured, not defaulted
}

// Handoff is the question put to a Policy.
type Handoff struct {
	// Peer is the other end: the receiver at egress, the sender at
	// ingress (Verified.Agent when signed, else the unauthenticated
	// Baton-Agent).
	Peer string
	// Signed: at ingress, the signature verified; at egress, this Baton
	// has a key and will sign.
	Signed bool
	// Grant is, at egress, the grant this agent received with the handoff
	// that caused this one; nil when it received none.
	Grant *Grant
	// Caller is, at ingress, the caller that runs no Baton a callers edge
	// named (Peer is then its edge's name); nil for a Baton's handoff.
	Caller *Caller
}

// Reasons of a Decision, stable for metrics labels and problem types.
const (
	DecisionAllowed         = "allowed"
	DecisionAllowedUnsigned = "allowed_unsigned" // allowed, posture lowered to untrusted
	DecisionNoEdge          = "no_edge"          // no edge to or from this peer
	DecisionUnsigned        = "unsigned"         // the edge requires a signature
	DecisionNotGranted      = "not_granted"      // the received grant does not include the peer
)

// Decision is a Policy's answer. Posture is the one to apply to what
// crosses the edge (the request's payload at ingress, the response at
// egress) when allowed.
type Decision struct {
	Allow   bool
	Reason  string
	Posture Posture
	Detail  string
}

// Policy holds the edges of one agent.
type Policy struct {
	out map[string]EdgeRule
	in  map[string]EdgeRule
}

// NewPolicy builds a Policy from the outbound edges (peers this agent may
// hand off to) and inbound edges (peers that may hand off to it). The error
// names every bad rule.
func NewPolicy(outbound, inbound []EdgeRule) (*Policy, error) {
	p := &Policy{out: map[string]EdgeRule{}, in: map[string]EdgeRule{}}
	var errs []error
	for _, side := range []struct {
		name  string
		rules []EdgeRule
		dst   map[string]EdgeRule
	}{{"outbound", outbound, p.out}, {"inbound", inbound, p.in}} {
		for i, r := range side.rules {
			at := fmt.Sprintf("%s[%d]", side.name, i)
			r.postureSet = r.Posture != ""
			if r.Posture == "" {
				r.Posture = DefaultPosture
			}
			switch {
			case r.Peer == "":
				errs = append(errs, fmt.Errorf("%s.peer: must be set", at))
			case !r.Posture.Valid():
				errs = append(errs, fmt.Errorf("%s.posture: must be trusted, evaluate or untrusted, got %q", at, r.Posture))
			case r.Callers && side.name == "outbound":
				errs = append(errs, fmt.Errorf("%s.callers: callers that run no Baton only send", at))
			case r.Callers && r.RequireSignature:
				errs = append(errs, fmt.Errorf("%s.require_signature: callers that run no Baton sign nothing", at))
			}
			if _, dup := side.dst[r.Peer]; dup {
				errs = append(errs, fmt.Errorf("%s.peer: %q has an %s edge already", at, r.Peer, side.name))
			}
			side.dst[r.Peer] = r
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// Outbound decides whether this agent may hand off to h.Peer: there must be
// an outbound edge to it, the grant received (if any) must include it, and a
// signature-requiring edge needs h.Signed.
func (p *Policy) Outbound(h Handoff) Decision {
	r, ok := p.out[h.Peer]
	switch {
	case !ok:
		return deny(DecisionNoEdge, "no outbound edge to "+quoteForError(h.Peer))
	case r.RequireSignature && !h.Signed:
		return deny(DecisionUnsigned, "the edge to "+quoteForError(h.Peer)+" requires a signature, and this Baton has no key")
	case !h.Grant.Allows(h.Peer):
		return deny(DecisionNotGranted, "the grant this agent received does not include "+quoteForError(h.Peer))
	}
	return Decision{Allow: true, Reason: DecisionAllowed, Posture: r.Posture}
}

// Inbound decides whether h.Peer may hand off to this agent: there must be
// an inbound edge from it, and a signature-requiring edge needs h.Signed.
// An unsigned handoff that the edge lets through comes from whoever claims
// to be h.Peer, so its posture is lowered to Untrusted.
//
// A callers edge admits only the Caller its rule named, never a Baton
// claiming its name: a Caller takes the edge's posture when one is
// configured, else Untrusted when anonymous and DefaultPosture when its
// credential checked out.
func (p *Policy) Inbound(h Handoff) Decision {
	r, ok := p.in[h.Peer]
	switch {
	case !ok:
		return deny(DecisionNoEdge, "no inbound edge from "+quoteForError(h.Peer))
	case r.Callers && h.Caller == nil:
		return deny(DecisionNoEdge, "the edge from "+quoteForError(h.Peer)+" is for callers that run no Baton")
	case !r.Callers && h.Caller != nil:
		return deny(DecisionNoEdge, "the edge from "+quoteForError(h.Peer)+" is not for callers that run no Baton")
	case h.Caller != nil:
		posture := r.Posture
		if !r.postureSet && h.Caller.Anonymous() {
			posture = Untrusted
		}
		return Decision{Allow: true, Reason: DecisionAllowed, Posture: posture}
	case !h.Signed && r.RequireSignature:
		return deny(DecisionUnsigned, "the edge from "+quoteForError(h.Peer)+" requires a signature")
	case !h.Signed:
		return Decision{Allow: true, Reason: DecisionAllowedUnsigned, Posture: Untrusted,
			Detail: "unsigned: the sender's identity is only claimed"}
	}
	return Decision{Allow: true, Reason: DecisionAllowed, Posture: r.Posture}
}

func deny(reason, detail string) Decision {
	return Decision{Reason: reason, Detail: detail}
}
