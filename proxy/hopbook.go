package proxy

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/batonproxy/baton/state"
)

// hopBook remembers the hop of each trace's inbound handoff, in this process
// (bounded, first in first out) and in the store (so that replicas sharing a
// Redis agree). Egress reads the local copy first and the store only on a
// miss; a store failure leaves the local copy in charge.
type hopBook struct {
	store state.Store
	ttl   time.Duration

	mu    sync.Mutex
	local map[string]hopEntry
	order []string // ring of keys in insertion order
	next  int
}

type hopEntry struct {
	hop     int
	expires time.Time
}

const hopBookSize = 1 << 16

func newHopBook(store state.Store, ttl time.Duration) *hopBook {
	return &hopBook{store: store, ttl: ttl, local: make(map[string]hopEntry), order: make([]string, hopBookSize)}
}

// hopKey keeps all of a trace's keys in one Redis Cluster slot.
func hopKey(traceID string) string { return "{" + traceID + "}:hop" }

func (b *hopBook) InboundHop(ctx context.Context, traceID string) (int, error) {
	b.mu.Lock()
	e, ok := b.local[traceID]
	b.mu.Unlock()
	if ok && time.Now().Before(e.expires) {
		return e.hop, nil
	}
	v, err := b.store.Get(ctx, hopKey(traceID))
	if errors.Is(err, state.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	hop, err := strconv.Atoi(string(v))
	if err != nil {
		return 0, nil
	}
	return hop, nil
}

func (b *hopBook) RememberInbound(ctx context.Context, traceID string, hop int) error {
	b.mu.Lock()
	if _, ok := b.local[traceID]; !ok {
		if old := b.order[b.next]; old != "" {
			delete(b.local, old)
		}
		b.order[b.next] = traceID
		b.next = (b.next + 1) % len(b.order)
	}
	b.local[traceID] = hopEntry{hop: hop, expires: time.Now().Add(b.ttl)}
	b.mu.Unlock()
	return b.store.Set(ctx, hopKey(traceID), strconv.AppendInt(nil, int64(hop), 10), b.ttl)
}
