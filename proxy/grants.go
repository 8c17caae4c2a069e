package proxy

import (
	"sync"
	"time"

	"github.com/batonproxy/baton/trust"
)

// grantBook remembers, per trace, the grant the inbound handoffs of the
// trace carried, narrowed by each, in this process: an agent's outbound
// handoffs leave through its own Baton, the one that delivered the inbound
// handoff, so no store round trip is needed on the hot path. It is bounded
// (first in, first out) and entries expire after ttl.
type grantBook struct {
	grants *fifo[*trust.Grant]
}

const grantBookSize = 1 << 16

func newGrantBook(ttl time.Duration) *grantBook {
	return &grantBook{grants: newFIFO[*trust.Grant](grantBookSize, ttl)}
}

// RememberGrant narrows the trace's grant by g: a later inbound handoff in
// the same trace (signed or not) can only narrow what the agent may do, never
// widen it.
func (b *grantBook) RememberGrant(traceID string, g *trust.Grant) {
	if g == nil {
		return
	}
	b.grants.update(traceID, func(old *trust.Grant, ok bool) *trust.Grant {
		if !ok {
			return g
		}
		return trust.Intersect(old, g)
	})
}

func (b *grantBook) InboundGrant(traceID string) *trust.Grant {
	g, _ := b.grants.get(traceID)
	return g
}

// fifo is a bounded map with expiry that forgets its oldest key when full.
type fifo[V any] struct {
	ttl   time.Duration
	size  int
	mu    sync.Mutex
	m     map[string]fifoEntry[V]
	order []string // grows to size, then wraps at next
	next  int
}

type fifoEntry[V any] struct {
	v       V
	expires time.Time
}

func newFIFO[V any](size int, ttl time.Duration) *fifo[V] {
	return &fifo[V]{ttl: ttl, size: size, m: make(map[string]fifoEntry[V])}
}

func (f *fifo[V]) get(k string) (V, bool) {
	f.mu.Lock()
	e, ok := f.m[k]
	f.mu.Unlock()
	if !ok || time.Now().After(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (f *fifo[V]) set(k string, v V) {
	f.update(k, func(V, bool) V { return v })
}

// update sets k to fn of its live value (and whether there was one).
func (f *fifo[V]) update(k string, fn func(old V, ok bool) V) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.m[k]
	live := ok && time.Now().Before(old.expires)
	v := fn(old.v, live)
	if !ok {
		if len(f.order) < f.size {
			f.order = append(f.order, k)
		} else {
			delete(f.m, f.order[f.next])
			f.order[f.next] = k
			f.next = (f.next + 1) % f.size
		}
	}
	f.m[k] = fifoEntry[V]{v: v, expires: time.Now().Add(f.ttl)}
}
