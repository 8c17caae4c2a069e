package middleware

import "sync"

// fifoMap is a bounded map whose oldest key goes when a new one needs room:
// what the egress remembers per handoff (edge and idempotency key) so that
// an agent's retry carries the same bytes as its first try. Safe for
// concurrent use.
type fifoMap[V any] struct {
	size  int
	mu    sync.Mutex
	m     map[string]V
	order []string // grows to size, then wraps at next
	next  int
}

func newFIFOMap[V any](size int) *fifoMap[V] {
	return &fifoMap[V]{size: size, m: make(map[string]V)}
}

// update sets key to f(the current value, whether there is one) and
// returns it; f runs under the lock. keep false leaves the map unchanged.
func (c *fifoMap[V]) update(key string, f func(cur V, ok bool) (next V, keep bool)) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.m[key]
	next, keep := f(cur, ok)
	if !keep {
		return next
	}
	if !ok {
		if len(c.order) < c.size {
			c.order = append(c.order, key)
		} else {
			delete(c.m, c.order[c.next])
			c.order[c.next] = key
			c.next = (c.next + 1) % c.size
		}
	}
	c.m[key] = next
	return next
}

// empty reports whether the map holds no key.
func (c *fifoMap[V]) empty() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m) == 0
}
