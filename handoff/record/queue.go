package record

import "sync"

// queue holds the records waiting for the flusher, oldest first, at most
// queueSize of them: a writer that finds it full waits for room. It is a
// ring that grows with what has waited in it at once, so that a Baton holds
// no room for thousands of records it never had waiting: a Record is over
// 600 bytes, and a queue made for queueSize of them at the start cost every
// Baton 2.6 MB of heap, which the collector scanned on every cycle.
type queue struct {
	mu     sync.Mutex
	ring   []queued // the records are ring[head], ring[head+1], ... n of them, wrapping
	head   int
	n      int
	closed bool
	room   sync.Cond // a writer waits on it while the queue is full
	// ready holds a token once something was queued (or the queue closed)
	// since the flusher last waited; a token may be stale, so the flusher
	// looks again after each.
	ready chan struct{}
}

func newQueue() *queue {
	q := &queue{ready: make(chan struct{}, 1)}
	q.room.L = &q.mu
	return q
}

// push queues a snapshot of each record, every one told done when it is
// stored (nil: nobody waits), in order. It reports false, queueing none,
// once the queue is closed: the caller writes them itself. Once it has
// begun it queues them all: the flusher, which drains the queue before it
// stops, makes room.
func (q *queue) push(done chan error, recs ...*Record) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	for _, r := range recs {
		for q.n >= queueSize {
			q.room.Wait()
		}
		if q.n == len(q.ring) {
			q.grow()
		}
		r.queued = true
		q.ring[(q.head+q.n)%len(q.ring)] = queued{rec: *r, done: done}
		if q.n++; q.n == 1 {
			q.signal() // it was empty: the flusher may be waiting
		}
	}
	q.mu.Unlock()
	return true
}

// grow doubles the ring, up to queueSize, keeping the records in order.
func (q *queue) grow() {
	ring := make([]queued, min(max(2*len(q.ring), 16), queueSize))
	k := copy(ring, q.ring[q.head:])
	copy(ring[k:], q.ring[:q.head])
	q.ring, q.head = ring, 0
}

// take appends to dst what is queued, oldest first, until dst holds max
// records, and reports whether the queue is closed.
func (q *queue) take(dst []queued, max int) ([]queued, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(q.n, max-len(dst))
	if n <= 0 {
		return dst, q.closed
	}
	full := q.n >= queueSize
	for n > 0 {
		seg := q.ring[q.head:min(q.head+n, len(q.ring))]
		dst = append(dst, seg...)
		clear(seg) // no stale references to the records' bytes
		q.head = (q.head + len(seg)) % len(q.ring)
		q.n -= len(seg)
		n -= len(seg)
	}
	if full {
		q.room.Broadcast()
	}
	return dst, q.closed
}

// wait returns once something is queued or the queue is closed.
func (q *queue) wait() {
	for {
		q.mu.Lock()
		ok := q.n > 0 || q.closed
		q.mu.Unlock()
		if ok {
			return
		}
		<-q.ready
	}
}

// close refuses later pushes; what is queued stays for the flusher.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default: // a token is already there
	}
}
