package proxy

import (
	"sync"
	"time"
)

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

// remove forgets k. Its place in the order stays until the order comes
// round to it, so a key removed and set again may be forgotten early.
func (f *fifo[V]) remove(k string) {
	f.mu.Lock()
	delete(f.m, k)
	f.mu.Unlock()
}

// empty reports whether f holds no key.
func (f *fifo[V]) empty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m) == 0
}
