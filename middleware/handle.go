package middleware

// Handle begins, at ingress, the handling of every request delivered to the
// local agent (handling.go), so that the calls the agent makes while it
// handles it are tied to it (correlate.go). It sits after Dedupe (a
// duplicate answered from the window is not handled again) and after
// Receipt (the handling's id is the receipt's). It cannot fail.

import (
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
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
	// InFlight returns the handling that sets the agent to work (Work) and
	// is in flight, when exactly one is; nil when none or several are.
	InFlight() *Handling
	// Working appends to buf the handlings that set the agent to work and
	// are in flight, when there are several (lineage.go); none when one at
	// most is.
	Working(buf []*Handling) []*Handling
	// Untied notes a handoff on edge, in trace, that its agent made and
	// that no handling took, its key coming from its content: each handling
	// in flight counts it, and the Baton says so (docs/resume.md).
	Untied(edge, traceID string)
}

// Handle returns the ingress middleware that begins a handling for each
// request it delivers to the agent. It derives a key for a request that
// carries none, so that the agent's calls have a root for their positional
// keys.
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
			h := &Handling{ID: in.RecordID, TraceID: in.TraceID, Hop: in.Hop, From: in.From, Parent: in.ParentRecord,
				Key: ScopeKey(in.From, in.To, in.Key), Started: in.Start, Work: setsToWork(r, in),
				Budget: in.ChainBudget, BudgetNote: in.BudgetNote}
			if h.Started.IsZero() {
				h.Started = time.Now()
			}
			if h.Budget.Set() && h.Budget.Chain == "" {
				// The chain enters here: it is named by this handling's
				// key, which a re-send to resume it keeps.
				h.Budget.Chain = hex.EncodeToString(h.Key[:])
			}
			if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
				h.SpanID, h.Flags = sc.SpanID(), sc.TraceFlags()
			}
			if rpc := in.RPC; rpc != nil {
				for _, id := range [...]string{rpc.ContextID, rpc.TaskID} {
					if id != "" {
						h.Contexts = append(h.Contexts, id)
					}
				}
			}
			if in.Buffered && len(in.Body) > 0 && h.Work {
				// The buffered body is never changed: a small one is kept
				// as it is, the head of a large one copied.
				h.lineage.read("its task", in.Body, nil, len(in.Body) <= MaxLineageRead)
			}
			in.Handling = h
			setHandlingMember(r.Header, h.ID)
			end := hs.Begin(h)
			defer end()
			next.ServeHTTP(w, r)
		})
	}
}

// setsToWork reports whether a delivered request may set the agent to work,
// and so make calls of its own: a request with a non-idempotent method that
// is not an MCP message other than a tool call, nor an A2A call other than
// a send (a task read, a cancel, a subscription). Reads beside a handling
// (an agent card, a task poll) do not make it one of several in flight.
func setsToWork(r *http.Request, in *Info) bool {
	if idempotentMethod(r.Method) {
		return false
	}
	rpc := in.RPC
	switch {
	case rpc == nil:
		return true
	case rpc.MCP != nil:
		return rpc.MCP.Handoff()
	case rpc.Method != "":
		return A2ASendMethod(rpc.Method) || !a2aRead(rpc.Method)
	}
	return true
}

// a2aRead reports an A2A method other than a send: v1.0's (GetTask,
// CancelTask, SubscribeToTask, ...) and v0.3's tasks/ and agent/ methods.
func a2aRead(method string) bool {
	return a2aMethod(method) || strings.HasPrefix(method, "tasks/") || strings.HasPrefix(method, "agent/")
}
