package middleware

// Correlation by A2A context. An agent that does not forward traceparent
// still names, in its A2A calls, the contextId or taskId of the work it was
// given. Remember remembers, at ingress, the trace and hop an A2A message's
// context and task arrived in; Correlate, at egress, ties an outbound A2A
// handoff that Identity found uncorrelated to that inbound handoff: its hop,
// parent record and grant then follow from it. A call that matches neither
// stays uncorrelated: it is never stitched to a trace by guesswork.
// Remember sits after Dedupe (which parses A2A requests); Correlate after
// IdempotencyKey (it needs the buffered body) and before Policy.

import (
	"net/http"
	"strconv"
)

// ContextBook remembers the inbound handoff an A2A context or task belongs
// to.
type ContextBook interface {
	RememberContext(id string, traceID string)
	ContextTrace(id string) string
}

// Remember returns the ingress half.
func Remember(book ContextBook) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			if in.RPC == nil && in.Buffered {
				sniffRPC(in, r, in.Body)
			}
			if rpc := in.RPC; rpc != nil {
				for _, id := range [...]string{rpc.ContextID, rpc.TaskID} {
					if id != "" {
						book.RememberContext(in.From+"\x00"+id, in.TraceID)
						book.RememberContext(id, in.TraceID)
					}
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Correlate returns the egress half.
func Correlate(contexts ContextBook, hops HopBook) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			if in.Handoff() && in.Uncorrelated && in.Buffered {
				sniffRPC(in, r, in.Body)
				if rpc := in.RPC; rpc != nil {
					for _, id := range [...]string{rpc.ContextID, rpc.TaskID} {
						if id == "" {
							continue
						}
						if trace := contexts.ContextTrace(id); trace != "" {
							if hop, parent := hops.InboundHop(trace); hop > 0 {
								in.Hop, in.ParentRecord, in.Uncorrelated = hop+1, parent, false
								in.CorrelatedTrace = trace
								if in.MaxHops > 0 && in.Hop > in.MaxHops {
									hopLimit(w, r, in)
									return
								}
								r.Header.Set(HeaderHop, strconv.Itoa(in.Hop))
								break
							}
						}
					}
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}
