package state

import (
	"sync"
	"time"
)

// FIFO is a bounded map kept in the process, with an optional expiry, that
// forgets its oldest key when a new one needs room: what a Baton remembers
// for a while and can afford to lose (an MCP session's owner, a trace's
// grant, a dead letter by key, a label computed once). Safe for concurrent
// use. The zero value is not usable: make one with NewFIFO.
type FIFO[V any] struct {
	ttl   time.Duration // 0: entries do not expire
	size  int
	mu    sync.Mutex
	m     map[string]fifoEntry[V]
	order []string // grows to size, then wraps at next
	next  int
}

type fifoEntry[V any] struct {
	v       V
	expires time.Time // zero: never
}

// NewFIFO returns a FIFO of at most size keys, each kept for ttl after it
// was last set (0: until it is pushed out).
func NewFIFO[V any](size int, ttl time.Duration) *FIFO[V] {
	return &FIFO[V]{ttl: ttl, size: max(size, 1), m: make(map[string]fifoEntry[V])}
}

func (f *FIFO[V]) live(e fifoEntry[V], now time.Time) bool {
	return e.expires.IsZero() || now.Before(e.expires)
}

// Get returns the live value of k.
func (f *FIFO[V]) Get(k string) (V, bool) {
	f.mu.Lock()
	e, ok := f.m[k]
	f.mu.Unlock()
	if !ok || !f.live(e, time.Now()) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Set sets k to v.
func (f *FIFO[V]) Set(k string, v V) {
	f.Update(k, func(V, bool) (V, bool) { return v, true })
}

// Update sets k to what fn makes of its live value (and whether there was
// one), under the FIFO's lock, and returns it; when fn says not to keep it,
// the FIFO is left as it was.
func (f *FIFO[V]) Update(k string, fn func(old V, ok bool) (next V, keep bool)) V {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	old, ok := f.m[k]
	live := ok && f.live(old, now)
	if !live {
		var zero V
		old.v = zero
	}
	v, keep := fn(old.v, live)
	if !keep {
		return v
	}
	if !ok {
		if len(f.order) < f.size {
			f.order = append(f.order, k)
		} else {
			delete(f.m, f.order[f.next])
			f.order[f.next] = k
			f.next = (f.next + 1) % f.size
		}
	}
	e := fifoEntry[V]{v: v}
	if f.ttl > 0 {
		e.expires = now.Add(f.ttl)
	}
	f.m[k] = e
	return v
}

// Remove forgets k. Its place in the order stays until the order comes
// round to it, so a key removed and set again may be forgotten early.
func (f *FIFO[V]) Remove(k string) {
	f.mu.Lock()
	delete(f.m, k)
	f.mu.Unlock()
}

// Empty reports whether f holds no key.
func (f *FIFO[V]) Empty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m) == 0
}
