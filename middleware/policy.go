package middleware

// Policy applies, at egress, the outbound edge policy before anything leaves
// the pod: no edge to the peer (once edges are configured) is 403, and so is
// a peer outside the grant this agent received in the trace (a grant only
// narrows as it travels). An outbound handoff Baton cannot tie to an inbound
// one is uncorrelated: with DenyUncorrelated it is refused with 403,
// otherwise passed and logged as such (never stitched to a trace). It then
// sends the receiver's grant: the intersection of what this agent received
// and what the edge declares. It sits after Identity (which correlates the
// trace, with Correlate) and cannot fail open: it needs no store.

import (
	"log/slog"
	"net/http"

	"github.com/batonproxy/baton/trust"
)

// PolicyOptions configures Policy.
type PolicyOptions struct {
	Policy           *trust.Policy // nil: no edges configured, every peer allowed
	Signing          bool          // this Baton signs its handoffs
	Grants           GrantBook
	EdgeGrant        func(peer string) *trust.Grant // the grant an edge declares, or nil
	DenyUncorrelated bool
	Log              *slog.Logger
}

// Policy returns the egress policy middleware.
func Policy(o PolicyOptions) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			if !in.Handoff() {
				next.ServeHTTP(w, r)
				return
			}
			if in.Uncorrelated {
				if o.DenyUncorrelated {
					policyDenied(w, r, "uncorrelated", "this handoff cannot be tied to an inbound handoff (no traceparent this Baton has seen), and trust.uncorrelated is deny")
					return
				}
				o.Log.LogAttrs(r.Context(), slog.LevelDebug, "uncorrelated handoff",
					slog.String("edge", in.Edge()), slog.String("trace_id", in.TraceID))
			} else if o.Grants != nil {
				trace := in.TraceID
				if in.CorrelatedTrace != "" {
					trace = in.CorrelatedTrace
				}
				in.GrantIn = o.Grants.InboundGrant(trace)
			}
			if o.Policy != nil {
				d := o.Policy.Outbound(trust.Handoff{Peer: in.To, Signed: o.Signing, Grant: in.GrantIn})
				if !d.Allow {
					o.Log.LogAttrs(r.Context(), slog.LevelWarn, "handoff refused by policy",
						slog.String("edge", in.Edge()), slog.String("trace_id", in.TraceID), slog.String("reason", d.Reason))
					policyDenied(w, r, d.Reason, d.Detail)
					return
				}
			} else if !in.GrantIn.Allows(in.To) {
				policyDenied(w, r, trust.DecisionNotGranted, "the grant this agent received does not include "+in.To)
				return
			}
			if g := trust.Intersect(in.GrantIn, o.EdgeGrant(in.To)); g != nil {
				enc, err := trust.EncodeGrant(*g)
				if err != nil {
					policyDenied(w, r, "grant", "the grant for "+in.To+" cannot be encoded: "+err.Error())
					return
				}
				in.GrantOut = enc
				r.Header.Set(HeaderGrant, enc)
			}
			next.ServeHTTP(w, r)
		})
	}
}
