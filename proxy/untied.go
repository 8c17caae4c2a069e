package proxy

import (
	"log/slog"
	"sync"
	"time"
)

// untiedEvery is how often, at most, the log warns per edge that an agent's
// handoffs are tied to no handling.
const untiedEvery = time.Minute

// Untied implements middleware.Handlings: each handling in flight counts a
// handoff no handling took (its receipt says so), and the log warns, at most
// once a minute per edge, naming the fix. A handoff made while nothing is
// in flight (the chain's entry, a scheduled job) is nothing to warn of.
func (hs *handlings) Untied(edge, traceID string) {
	hs.mu.Lock()
	n := len(hs.working)
	for h := range hs.working {
		h.NoteUntied()
	}
	hs.mu.Unlock()
	if n > 0 {
		hs.warn.warn(edge, traceID, n)
	}
}

// untiedWarner rate-limits the warning per edge.
type untiedWarner struct {
	log *slog.Logger

	mu     sync.Mutex
	last   map[string]time.Time
	missed map[string]int // handoffs since the last warning of the edge
}

func (w *untiedWarner) warn(edge, traceID string, inFlight int) {
	if w == nil || w.log == nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	if w.last == nil {
		w.last, w.missed = map[string]time.Time{}, map[string]int{}
	}
	w.missed[edge]++
	if now.Sub(w.last[edge]) < untiedEvery {
		w.mu.Unlock()
		return
	}
	n := w.missed[edge]
	w.last[edge], w.missed[edge] = now, 0
	w.mu.Unlock()
	w.log.Warn("handoffs tied to no inbound handoff: keyed by their content, so a re-run with other bodies runs them again",
		"edge", edge, "trace_id", traceID, "handoffs", n, "handlings_in_flight", inFlight,
		"fix", "propagate W3C trace context (annotate the pod baton.dev/instrument, or run the agent with baton exec --instrument), "+
			"serve one request at a time, or send Idempotency-Key; see docs/resume.md")
}
