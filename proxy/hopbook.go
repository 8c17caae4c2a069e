package proxy

import (
	"sync"
	"time"
)

// hopBook remembers the hop of each trace's inbound handoff, in this process:
// an agent's outbound handoffs leave through its own Baton, the one that
// delivered the inbound handoff, so no store round trip is needed on the hot
// path. It is bounded (first in, first out) and entries expire after ttl.
type hopBook struct {
	ttl time.Duration

	mu    sync.Mutex
	local map[string]hopEntry
	order []string // ring of trace ids in insertion order
	next  int
}

type hopEntry struct {
	hop     int
	record  string
	expires time.Time
}

const hopBookSize = 1 << 16

func newHopBook(ttl time.Duration) *hopBook {
	return &hopBook{ttl: ttl, local: make(map[string]hopEntry), order: make([]string, hopBookSize)}
}

func (b *hopBook) InboundHop(traceID string) (int, string) {
	b.mu.Lock()
	e, ok := b.local[traceID]
	b.mu.Unlock()
	if ok && time.Now().Before(e.expires) {
		return e.hop, e.record
	}
	return 0, ""
}

func (b *hopBook) RememberInbound(traceID string, hop int, recordID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.local[traceID]; !ok {
		if old := b.order[b.next]; old != "" {
			delete(b.local, old)
		}
		b.order[b.next] = traceID
		b.next = (b.next + 1) % len(b.order)
	}
	b.local[traceID] = hopEntry{hop: hop, record: recordID, expires: time.Now().Add(b.ttl)}
}
