package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonproxy/baton/middleware"
)

// handlings keeps this Baton's agent's handlings (middleware.Handlings): the
// inbound handoffs it is handling, and those it answered, for its later
// handoffs (an agent may go on working after it answers) and for a re-run's
// handoffs to find the earlier run's. A handling in flight is never
// forgotten; one the agent answered is kept until ttl passes or recent more
// were answered after it, oldest first.
type handlings struct {
	ttl time.Duration
	// ended, when set, is told of each handling the agent answered.
	ended func(*middleware.Handling)
	// warn says in the log that handoffs are tied to no handling (untied.go).
	warn *untiedWarner
	// overlapped is set once two handlings that set the agent to work were
	// in flight at once: from then on lineage keeps what the agent reads.
	overlapped atomic.Bool

	mu        sync.Mutex
	working   map[*middleware.Handling]struct{} // in flight, setting the agent to work (Work)
	byID      map[string]*middleware.Handling
	byTrace   map[string]*middleware.Handling // the newest, linked to older ones by Older (at most perTrace)
	byContext map[string]*middleware.Handling // A2A context and task ids
	answered  []*middleware.Handling          // a ring of the recent answered ones
	next      int
}

const (
	recentHandlings = 1 << 16
	perTrace        = 16
)

func newHandlings(ttl time.Duration) *handlings {
	return &handlings{ttl: ttl, working: map[*middleware.Handling]struct{}{}, byID: map[string]*middleware.Handling{},
		byTrace: map[string]*middleware.Handling{}, byContext: map[string]*middleware.Handling{}}
}

// Begin implements middleware.Handlings.
func (hs *handlings) Begin(h *middleware.Handling) (end func()) {
	hs.mu.Lock()
	hs.byID[h.ID] = h
	h.Older = hs.byTrace[h.TraceID]
	hs.byTrace[h.TraceID] = h
	n := 1
	for o := h; o.Older != nil; o = o.Older {
		if n++; n > perTrace {
			o.Older = nil // the oldest is found by its id only
			break
		}
	}
	for _, c := range h.Contexts {
		hs.byContext[c] = h
	}
	if h.Work {
		hs.working[h] = struct{}{}
		if len(hs.working) > 1 && !hs.overlapped.Load() {
			hs.overlapped.Store(true)
		}
	}
	hs.mu.Unlock()
	return func() { hs.answer(h) }
}

// InFlight implements middleware.Handlings.
func (hs *handlings) InFlight() *middleware.Handling {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.working) != 1 {
		return nil
	}
	for h := range hs.working {
		if !h.Done() { // answered, and about to leave the map
			return h
		}
	}
	return nil
}

// overlapping reports whether the agent serves several requests at once:
// two handlings that set it to work have been in flight together. Then
// lineage keeps what the agent reads within each handling, whether or not
// another is in flight at that moment: a handling that was alone when it
// read an answer may have company when it quotes it. An agent that serves
// one request at a time never pays for it.
func (hs *handlings) overlapping() bool { return hs.overlapped.Load() }

// Working implements middleware.Handlings.
func (hs *handlings) Working(buf []*middleware.Handling) []*middleware.Handling {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.working) < 2 {
		return buf
	}
	for h := range hs.working {
		if !h.Done() {
			buf = append(buf, h)
		}
	}
	return buf
}

// answer moves h among the answered handlings, forgetting the oldest of
// them when there are recentHandlings.
func (hs *handlings) answer(h *middleware.Handling) {
	h.Finish()
	if hs.ended != nil {
		hs.ended(h)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.working, h)
	if len(hs.answered) < recentHandlings {
		hs.answered = append(hs.answered, h)
		return
	}
	hs.forget(hs.answered[hs.next])
	hs.answered[hs.next] = h
	hs.next = (hs.next + 1) % recentHandlings
}

// forget removes h from every index that still points at it.
func (hs *handlings) forget(h *middleware.Handling) {
	if hs.byID[h.ID] == h {
		delete(hs.byID, h.ID)
	}
	if newest := hs.byTrace[h.TraceID]; newest == h {
		if h.Older == nil {
			delete(hs.byTrace, h.TraceID)
		} else {
			hs.byTrace[h.TraceID] = h.Older
		}
	} else {
		for o := newest; o != nil; o = o.Older {
			if o.Older == h {
				o.Older = h.Older
				break
			}
		}
	}
	h.Older = nil
	for _, c := range h.Contexts {
		if hs.byContext[c] == h {
			delete(hs.byContext, c)
		}
	}
}

// fresh reports whether h may still be found: in flight, or answered less
// than ttl after it started.
func (hs *handlings) fresh(h *middleware.Handling, now time.Time) bool {
	return !h.Done() || now.Sub(h.Started) < hs.ttl
}

// Handling implements middleware.Handlings.
func (hs *handlings) Handling(id string) *middleware.Handling { return hs.find(hs.byID, id) }

// OfContext implements middleware.Handlings.
func (hs *handlings) OfContext(id string) *middleware.Handling { return hs.find(hs.byContext, id) }

// find returns the handling of index m under k, while it may be found.
func (hs *handlings) find(m map[string]*middleware.Handling, k string) *middleware.Handling {
	hs.mu.Lock()
	h := m[k]
	hs.mu.Unlock()
	if h == nil || !hs.fresh(h, time.Now()) {
		return nil
	}
	return h
}

// OfTrace implements middleware.Handlings.
func (hs *handlings) OfTrace(traceID string, buf []*middleware.Handling) []*middleware.Handling {
	now := time.Now()
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for h := hs.byTrace[traceID]; h != nil; h = h.Older {
		if hs.fresh(h, now) {
			buf = append(buf, h)
		}
	}
	return buf
}
