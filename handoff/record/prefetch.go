package record

import (
	"context"
	"sync"
	"time"
)

// A Baton whose agent hands on what a peer's Baton sent it writes the record
// of that handoff before sending it, following the peer's entries
// (FollowsPeer, expect.go): reading the trace's tail first is a round trip
// on the request path. Prefetch reads it earlier, when the peer's handoff
// arrives, beside the round trips that handoff makes anyway before it
// reaches the agent (its dedupe window's claim). While the handling goes on
// the sender waits for its answer, so the sender's outcome cannot land in
// between; another writer of the trace can (a retry from the sender, a
// fan-out), and then the link is refused and linked again, as any other.
// Only the records of handoffs made during the handling take a prefetched
// tail: the receipt is written at the handling's end, about when the
// sender's outcome lands, and reads the tail when it is linked; its
// writing drops the prefetch, taken or not. As with every tail, the read
// is the store's answer, never the peer's word.

// maxPrefetches bounds the prefetches waiting to be taken: beyond it they
// start over (an untaken prefetch costs a read, never correctness).
const maxPrefetches = 4096

// prefetchTimeout bounds one prefetch's read.
const prefetchTimeout = 10 * time.Second

// prefetched is one read of a trace's tail, done when done is closed: ok
// when the store answered, tail "" when it holds no entry of the trace.
type prefetched struct {
	done chan struct{}
	tail string
	ok   bool
}

type prefetches struct {
	mu sync.Mutex
	m  map[string]*prefetched
}

// Prefetch starts reading the tail of trace traceID, whose handoff from a
// peer's Baton has arrived, for the record of a handoff the agent may make
// in turn. An in-process store, or a trace this Book has linked to, has
// nothing to read.
func (b *Book) Prefetch(traceID string) {
	if b.store == nil || b.local != nil || b.tails.get(traceID, time.Now()) != "" {
		return
	}
	p := &prefetched{done: make(chan struct{})}
	b.prefetch.mu.Lock()
	if _, ok := b.prefetch.m[traceID]; ok {
		b.prefetch.mu.Unlock()
		return
	}
	if b.prefetch.m == nil || len(b.prefetch.m) >= maxPrefetches {
		b.prefetch.m = make(map[string]*prefetched)
	}
	b.prefetch.m[traceID] = p
	b.prefetch.mu.Unlock()
	go func() {
		defer close(p.done)
		ctx, cancel := context.WithTimeout(context.Background(), prefetchTimeout)
		defer cancel()
		if tails, err := b.store.ChainTails(ctx, []string{chainKey(traceID)}); err == nil {
			p.tail, p.ok = tails[0], true
		}
	}()
}

// take removes trace's prefetch and returns it (nil: none).
func (p *prefetches) take(trace string) *prefetched {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.m[trace]
	delete(p.m, trace)
	return got
}

// prefetchedTail uses a prefetched read of rec's trace's tail for rec, the
// record of a handoff made during a handling, and reports whether it did;
// the receipt (an ingress record) drops the prefetch instead. A read that
// failed is not used: the write reads again.
func (b *Book) prefetchedTail(rec *Record, now time.Time) bool {
	p := b.prefetch.take(rec.TraceID)
	if p == nil || rec.Side != Egress {
		return false
	}
	<-p.done // started when the handoff arrived: done, or sooner done than a new read
	if !p.ok {
		return false
	}
	b.probes.found(rec.peer, p.tail != "")
	if p.tail != "" {
		b.tails.learn(rec.TraceID, p.tail, now)
	}
	return true
}
