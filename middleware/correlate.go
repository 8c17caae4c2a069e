package middleware

// Correlation: which inbound handoff an outbound one is made for. At
// ingress, Handle begins a Handling for every request delivered to the local
// agent and tells the agent its id in W3C baggage. At egress, an outbound
// handoff is tied to a handling by what the agent's request carries, most
// exact first:
//
//  1. the baton.handling baggage member (an agent instrumented with
//     OpenTelemetry propagates baggage);
//  2. traceparent as the agent received it (its parent-id is the handling's
//     span);
//  3. its trace, when the trace has one handling in flight (or one after
//     the agent answered), or several that share one inbound key;
//  4. for an A2A message, the contextId or taskId of an inbound message
//     (correlateA2A, once the body is buffered).
//
// A trace with several handlings and none of the exact signals is
// ambiguous: the handoff keeps its trace and hop but gets a key from its
// content, and its record says so. A handoff that matches nothing is
// uncorrelated: never stitched to a trace by guesswork. Only this Baton's
// own handlings are looked up, so a forged or stale signal finds nothing.

import (
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/handoff/record"
)

// Handlings keeps the handlings of this Baton's agent. It lives in the
// process: an agent's outbound handoffs leave through the Baton that
// delivered its inbound ones, so finding a handling costs no store round
// trip.
type Handlings interface {
	// Begin records that the agent is handling h; end records that it
	// answered.
	Begin(h *Handling) (end func())
	// Handling returns the handling with id, or nil.
	Handling(id string) *Handling
	// OfTrace appends the trace's handlings to buf, newest first.
	OfTrace(traceID string, buf []*Handling) []*Handling
	// OfContext returns the newest handling whose inbound A2A message named
	// the context or task id, or nil.
	OfContext(id string) *Handling
}

// Handle returns the ingress middleware that begins a handling for each
// request it delivers to the agent: it sits after Dedupe (a duplicate
// answered from the window is not handled again) and after Receipt (the
// handling's id is the receipt's). It derives a key for a request that
// carries none, so that the agent's calls have a root for their positional
// keys. It cannot fail.
func Handle(hs Handlings) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			if in.RPC == nil && in.Buffered {
				sniffRPC(in, r, in.Body)
			}
			if in.Key == "" {
				if key, err := ParseKey(r.Header[HeaderIdempotencyKey]); err == nil {
					in.Key = key
				} else {
					quoted := deriveKey(in, r, in.Body)
					in.Key, in.KeyDerived = quoted[1:len(quoted)-1], true
				}
			}
			h := &Handling{ID: in.RecordID, TraceID: in.TraceID, Hop: in.Hop, From: in.From,
				Key: ScopeKey(in.From, in.To, in.Key), Started: in.Start}
			if h.Started.IsZero() {
				h.Started = time.Now()
			}
			if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
				h.SpanID = sc.SpanID()
			}
			if rpc := in.RPC; rpc != nil {
				for _, id := range [...]string{rpc.ContextID, rpc.TaskID} {
					if id != "" {
						h.Contexts = append(h.Contexts, id)
					}
				}
			}
			in.Handling = h
			setHandlingMember(r.Header, h.ID)
			end := hs.Begin(h)
			defer end()
			next.ServeHTTP(w, r)
		})
	}
}

// correlate ties an outbound handoff to its handling by its headers (rules
// 1 to 3 above); member is the baton.handling value the agent sent.
func correlate(hs Handlings, in *Info, member string) {
	if member != "" {
		if h := hs.Handling(member); h != nil {
			in.tie(h, record.CorrelatedByBaggage)
			return
		}
	}
	var buf [8]*Handling
	cands := hs.OfTrace(in.TraceID, buf[:0])
	if len(cands) == 0 {
		return
	}
	if span, ok := parentSpan(in.TraceparentIn); ok {
		for _, h := range cands {
			if h.SpanID == span {
				in.tie(h, record.CorrelatedByTraceparent)
				return
			}
		}
	}
	if h := onlyHandling(cands); h != nil {
		in.tie(h, record.CorrelatedByTrace)
		return
	}
	// Several handlings of the trace: the handoff belongs to the trace, at
	// the depth of the deepest, but to no one handling.
	in.Correlation = record.CorrelationAmbiguous
	for _, h := range cands {
		in.Hop = max(in.Hop, h.Hop+1)
	}
}

// CorrelateFetch ties an external fetch to the handling it is made for, by
// rules 1 to 3, as a handoff is tied: the call journal keeps fetches per
// handling. Other fetches are never tied (nothing needs it).
func CorrelateFetch(hs Handlings, in *Info) {
	if in.Handling == nil && !in.Handoff() {
		correlate(hs, in, in.member)
	}
}

// correlateA2A ties an A2A handoff that its headers did not tie to a
// handling by the contextId or taskId of its message (rule 4). It reports
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
			r.Header.Set(HeaderHop, strconv.Itoa(in.Hop))
			return true
		}
	}
	return false
}

// tie makes h the handling the request is made for.
func (in *Info) tie(h *Handling, how string) {
	in.Handling, in.Correlation = h, how
	in.Hop, in.ParentRecord, in.Uncorrelated = h.Hop+1, h.ID, false
	if h.TraceID != in.TraceID {
		in.CorrelatedTrace = h.TraceID
	}
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

// parentSpan returns the parent-id of a version-00 traceparent.
func parentSpan(tp string) (trace.SpanID, bool) {
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanID{}, false
	}
	id, err := trace.SpanIDFromHex(tp[36:52])
	return id, err == nil
}
