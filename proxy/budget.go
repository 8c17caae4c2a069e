package proxy

import (
	"sync"
	"time"
)

// budget is an edge's retry budget: over a rolling window, retries may not
// exceed ratio × requests, though minRetries are always allowed so that a
// quiet edge can still retry. The window is kept in ten buckets.
type budget struct {
	ratio      float64
	minRetries int
	bucket     time.Duration

	mu       sync.Mutex
	requests [10]int
	retries  [10]int
	at       [10]int64 // bucket number each slot holds
}

func newBudget(ratio float64, window time.Duration) *budget {
	if window <= 0 {
		window = 10 * time.Second
	}
	return &budget{ratio: ratio, minRetries: 3, bucket: window / 10}
}

// slot returns the index of the current bucket, clearing it if stale.
func (b *budget) slot(now time.Time) int {
	n := now.UnixNano() / int64(b.bucket)
	i := int(n % int64(len(b.at)))
	if b.at[i] != n {
		b.at[i], b.requests[i], b.retries[i] = n, 0, 0
	}
	return i
}

// request counts a new request.
func (b *budget) request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests[b.slot(time.Now())]++
}

// allowRetry counts and allows a retry if the budget has room.
func (b *budget) allowRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	i := b.slot(now)
	cur := now.UnixNano() / int64(b.bucket)
	reqs, rets := 0, 0
	for j := range b.at {
		if cur-b.at[j] < int64(len(b.at)) {
			reqs += b.requests[j]
			rets += b.retries[j]
		}
	}
	if float64(rets+1) > max(float64(b.minRetries), b.ratio*float64(reqs)) {
		return false
	}
	b.retries[i]++
	return true
}

// remaining returns the retries the budget allows now and that as a share
// of all it allows in the window (1 untouched, 0 exhausted).
func (b *budget) remaining() (left, share float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := time.Now().UnixNano() / int64(b.bucket)
	reqs, rets := 0, 0
	for j := range b.at {
		if cur-b.at[j] < int64(len(b.at)) {
			reqs += b.requests[j]
			rets += b.retries[j]
		}
	}
	allowed := max(float64(b.minRetries), b.ratio*float64(reqs))
	left = max(allowed-float64(rets), 0)
	return left, left / allowed
}
