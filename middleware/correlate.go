package middleware

// Correlation: which inbound handoff an outbound call is made for. At
// ingress, Handle begins a Handling for every request delivered to the local
// agent and tells the agent its id in W3C baggage. At egress, Correlate ties
// each call the agent makes (a handoff or an external fetch) to a handling
// by what the call carries, most exact first:
//
//  1. the baton.handling baggage member (an agent instrumented with
//     OpenTelemetry propagates baggage), when the call names no other trace
//     than the handling's;
//  2. traceparent as the agent received it (its parent-id is the handling's
//     span);
//  3. its trace, when the trace has one handling in flight (or one after
//     the agent answered), or several that share one inbound key;
//  4. with no traceparent and no member at all (an agent that forwards
//     nothing), the one handling in flight at this Baton, when exactly one
//     is: agents that serve one request at a time need no instrumentation;
//     when several are, the one whose distinctive phrases the call quotes
//     of what the agent read within it (lineage.go);
//  5. for an A2A message, the contextId or taskId of an inbound message
//     (correlateA2A, once the body is buffered).
//
// A call tied by rule 1 or 4 that carries no traceparent continues the
// handling's trace, as if the agent had forwarded it. A trace with several
// handlings and none of the exact signals is ambiguous: the handoff keeps
// its trace and hop but gets a key from its content, and its record says
// so. A call that matches nothing is uncorrelated: never stitched to a
// trace by guesswork. Only this Baton's own handlings are looked up, so a
// forged or stale signal finds nothing, and a member naming a handling of
// another trace than the call's is ignored.

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/handoff/record"
)

// Correlate returns the egress middleware that ties each call of the agent
// to the handling it is made for (rules 1 to 4 above), and removes the
// baton.handling member from what leaves the pod. It sits before Trace, so
// that a call tied to a handling without traceparent continues the
// handling's trace. It cannot fail.
func Correlate(hs Handlings) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			signal := mentionsHandling(r.Header)
			member := takeHandlingMember(r.Header)
			tps := r.Header[HeaderTraceparent]
			tp := ""
			if len(tps) == 1 {
				tp = tps[0]
			}
			correlate(hs, in, member, tp, signal || len(tps) > 0)
			if in.Handling == nil && !signal && len(tps) == 0 {
				tieByLineage(hs, in, r) // several in flight: what the call quotes (lineage.go)
			}
			if h := in.Handling; h != nil && len(tps) == 0 && h.SpanID.IsValid() {
				// The agent forwarded no trace: the call continues the
				// handling's, as an instrumented agent's would.
				r.Header[HeaderTraceparent] = []string{h.traceparent()}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// correlate ties a call to its handling by its headers: member is the
// baton.handling value the agent sent, tp its traceparent; signal reports
// that the call carried either (well-formed or not), which rules out the
// one-in-flight rule.
func correlate(hs Handlings, in *Info, member, tp string, signal bool) {
	traceID, span, hasTrace := parseTraceparent(tp)
	if member != "" {
		// A member is only good for the trace it was given in: one naming
		// a handling of another trace than the call's is forged or stale.
		if h := hs.Handling(member); h != nil && (!hasTrace || h.TraceID == traceID) {
			in.tie(h, record.CorrelatedByBaggage)
			return
		}
	}
	if !hasTrace {
		if !signal {
			if h := hs.InFlight(); h != nil {
				in.tie(h, record.CorrelatedByInFlight)
			}
		}
		return
	}
	var buf [8]*Handling
	cands := hs.OfTrace(traceID, buf[:0])
	if len(cands) == 0 {
		return
	}
	for _, h := range cands {
		if h.SpanID == span {
			in.tie(h, record.CorrelatedByTraceparent)
			return
		}
	}
	if h := onlyHandling(cands); h != nil {
		in.tie(h, record.CorrelatedByTrace)
		return
	}
	// Several handlings of the trace: the call belongs to the trace, at the
	// depth of the deepest, but to no one handling.
	in.Correlation = record.CorrelationAmbiguous
	for _, h := range cands {
		in.Hop = max(in.Hop, h.Hop+1)
	}
}

// correlateA2A ties an A2A handoff that its headers did not tie to a
// handling by the contextId or taskId of its message (rule 5). It reports
// whether it did.
func correlateA2A(hs Handlings, in *Info, r *http.Request) bool {
	sniffRPC(in, r, in.Body)
	rpc := in.RPC
	if rpc == nil {
		return false
	}
	for _, id := range [...]string{rpc.ContextID, rpc.TaskID} {
		if id == "" {
			continue
		}
		if h := hs.OfContext(id); h != nil {
			in.tie(h, record.CorrelatedByA2A)
			if h.TraceID != in.TraceID {
				in.CorrelatedTrace = h.TraceID
			}
			r.Header.Set(HeaderHop, strconv.Itoa(in.Hop))
			return true
		}
	}
	return false
}

// tie makes h the handling the call is made for.
func (in *Info) tie(h *Handling, how string) {
	in.Handling, in.Correlation, in.CorrelationEvidence = h, how, ""
	in.Hop, in.ParentRecord, in.Uncorrelated = h.Hop+1, h.ID, false
}

// onlyHandling picks the handling a trace's outbound handoff is made for
// when the trace alone must say: the one in flight, or the newest of those
// in flight when they all handle the same inbound key (a re-run); with none
// in flight, the same among those answered. It returns nil when that leaves
// a choice.
func onlyHandling(cands []*Handling) *Handling {
	var pick *Handling
	for _, live := range [...]bool{true, false} {
		for _, h := range cands {
			if h.Done() == live {
				continue
			}
			switch {
			case pick == nil:
				pick = h
			case pick.Key != h.Key:
				return nil
			}
		}
		if pick != nil {
			return pick
		}
	}
	return nil
}

// parseTraceparent returns the trace id (hex) and parent-id of a version-00
// traceparent, and whether it is one.
func parseTraceparent(tp string) (string, trace.SpanID, bool) {
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return "", trace.SpanID{}, false
	}
	// Both decoders take lowercase hex only: the trace id as written is the
	// one a span context renders.
	if _, err := trace.TraceIDFromHex(tp[3:35]); err != nil {
		return "", trace.SpanID{}, false
	}
	sid, err := trace.SpanIDFromHex(tp[36:52])
	if err != nil {
		return "", trace.SpanID{}, false
	}
	return tp[3:35], sid, true
}
