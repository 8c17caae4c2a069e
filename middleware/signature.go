package middleware

// Verify checks, at ingress, the sender Baton's RFC 9421 signature before
// anything else acts on the handoff: the key must be in the trust bundle,
// the signature valid over the covered components, the body must match its
// Content-Digest, created must lie within the allowed skew, and the nonce
// must be new (kept in the store for the skew window; Dedupe claims it, in
// one round trip with the idempotency key). Any failure is 401
// and the agent sees nothing. Then the inbound edge policy applies: no edge
// from the sender (once edges are configured) is 403; an unsigned handoff on
// an edge that requires a signature is 401. The grant the sender gave
// (Baton-Grant, covered by the signature) is remembered under the trace so
// that the agent's own handoffs in it can be checked against it.
//
// A caller that runs no Baton, named by Callers (callers.go) just before,
// arrives here unsigned with its edge's name in Baton-Agent; the policy
// admits it on that callers edge only.
//
// It sits after Trace (which keeps the traceparent as received, as the
// signature covers it) and Limit (it reads the capped body), before
// HopGuard. It needs no store itself.

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// HeaderGrant carries the bounded grant for the receiver.
const HeaderGrant = "Baton-Grant"

// GrantBook remembers the grant each trace's inbound handoff carried.
type GrantBook interface {
	RememberGrant(traceID string, g *trust.Grant)
	InboundGrant(traceID string) *trust.Grant
}

// VerifyOptions configures Verify.
type VerifyOptions struct {
	Verifier *trust.Verifier // nil: no trust bundle, nothing can be verified
	Policy   *trust.Policy   // nil: no edges configured, every sender allowed
	// RequireAll requires a signature from every sender when Policy is nil
	// (a bundle is configured but no edges).
	RequireAll bool
	Grants     GrantBook
	Log        *slog.Logger
}

// Verify returns the ingress signature and policy middleware.
func Verify(o VerifyOptions) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			claimed, ok := singleHeader(r.Header, HeaderAgent)
			if !ok || (claimed != "" && !ValidAgentName(claimed)) {
				problem.Write(w, r, problem.BadRequest, "Baton-Agent must be one agent name")
				return
			}
			signed := r.Header.Get(HeaderSignature) != "" || r.Header.Get(HeaderSignatureInput) != ""
			if signed {
				if o.Verifier == nil {
					refuseSignature(w, r, trust.ReasonUnknownKey, "this Baton has no trust bundle, so it cannot verify signatures")
					return
				}
				if !Buffer(w, r, in) {
					return
				}
				msg := trust.RequestMessage(r, in.Body)
				if in.TraceparentIn != r.Header.Get(HeaderTraceparent) {
					msg.Header = r.Header.Clone()
					if in.TraceparentIn == "" {
						msg.Header.Del(HeaderTraceparent)
					} else {
						msg.Header.Set(HeaderTraceparent, in.TraceparentIn)
					}
				}
				v, err := o.Verifier.Verify(msg, time.Now())
				if err != nil {
					reason := trust.ReasonMalformed
					var se *trust.SignatureError
					if errors.As(err, &se) {
						reason = se.Reason
					}
					in.Err = err
					refuseSignature(w, r, reason, err.Error())
					return
				}
				// The nonce is claimed by Dedupe, in the same round trip as the
				// idempotency key when there is one.
				in.Nonce = &state.ClaimOp{Key: "nonce:{" + v.KeyID + "}:" + v.Nonce, Val: []byte{1}, TTL: time.Until(v.NonceUntil)}
				in.Signed, in.SenderKeyID = true, v.KeyID
			}
			switch {
			case o.Policy != nil:
				d := o.Policy.Inbound(trust.Handoff{Peer: claimed, Signed: in.Signed, Caller: in.Caller})
				if !d.Allow {
					if d.Reason == trust.DecisionUnsigned {
						refuseSignature(w, r, trust.ReasonMissing, d.Detail)
					} else {
						policyDenied(w, r, d.Reason, d.Detail)
					}
					return
				}
				in.Posture = string(d.Posture)
			case o.RequireAll && !in.Signed:
				refuseSignature(w, r, trust.ReasonMissing, "handoffs to this Baton must be signed")
				return
			case !in.Signed:
				in.Posture = string(trust.Untrusted)
			default:
				in.Posture = string(trust.DefaultPosture)
			}
			if g := r.Header.Get(HeaderGrant); g != "" {
				grant, err := trust.DecodeGrant(g)
				if err != nil {
					problem.Write(w, r, problem.BadRequest, "Baton-Grant: "+err.Error())
					return
				}
				in.GrantIn = &grant
			}
			if o.Grants != nil {
				o.Grants.RememberGrant(in.TraceID, in.GrantIn)
			}
			r.Header.Del(HeaderSignature)
			r.Header.Del(HeaderSignatureInput)
			next.ServeHTTP(w, r)
		})
	}
}

// ReasonReplayed is the signature failure of a nonce seen before.
const ReasonReplayed = "replayed"

func refuseSignature(w http.ResponseWriter, r *http.Request, reason, detail string) {
	info(r).SignatureFailure = reason
	problem.New(r, problem.BadSignature, detail).With("reason", reason).Write(w)
}

func policyDenied(w http.ResponseWriter, r *http.Request, reason, detail string) {
	info(r).PolicyDenial = reason
	problem.New(r, problem.PolicyDenied, detail).With("reason", reason).Write(w)
}
