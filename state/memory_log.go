package state

import (
	"bytes"
	"context"
	"time"
)

// Append adds val at the end of the log at key and sets the log's TTL.
func (m *Memory) Append(_ context.Context, key string, val []byte, ttl time.Duration) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.appendLocked(m.now(), key, bytes.Clone(val), ttl)
}

// AppendCounting is Append, then IndexIncr of counts.
func (m *Memory) AppendCounting(ctx context.Context, key string, val []byte, ttl time.Duration, counts Counts) (int64, error) {
	n, err := m.Append(ctx, key, val, ttl)
	if err != nil {
		return 0, err
	}
	if _, err := m.IndexIncr(ctx, counts.Key, counts.Deltas, counts.TTL); err != nil {
		return 0, err
	}
	return n, nil
}

// appendLocked is Append with the lock held.
// appendLocked keeps val itself: callers pass a copy, or bytes they gave up.
func (m *Memory) appendLocked(now int64, key string, val []byte, ttl time.Duration) (int64, error) {
	e := m.live(key, now)
	dSize := int64(len(val))
	if e == nil {
		dSize += int64(len(key))
	} else if e.kind != kindLog {
		return 0, ErrWrongKind
	}
	if err := m.makeRoom(now, e, 1, dSize); err != nil {
		return 0, err
	}
	if e == nil {
		e = m.insert(key, kindLog)
	}
	e.log = append(e.log, val)
	m.resize(e, 1, dSize)
	m.written(e)
	m.expireAt(e, deadline(now, ttl))
	return int64(len(e.log)), nil
}

// Range returns copies of the log entries from start to stop inclusive, with
// Redis LRANGE semantics. An absent log is empty.
func (m *Memory) Range(_ context.Context, key string, start, stop int64) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(key, m.now())
	if e == nil {
		return [][]byte{}, nil
	}
	if e.kind != kindLog {
		return nil, ErrWrongKind
	}
	lo, hi := lrange(int64(len(e.log)), start, stop)
	part := e.log[lo:hi]
	n := 0
	for _, v := range part {
		n += len(v)
	}
	// One backing array for all the copies; each slice is capped so that an
	// append by the caller cannot run into its neighbour.
	buf := make([]byte, 0, n)
	out := make([][]byte, len(part))
	for i, v := range part {
		at := len(buf)
		buf = append(buf, v...)
		out[i] = buf[at:len(buf):len(buf)]
	}
	return out, nil
}

// lrange turns LRANGE start and stop indexes into a half-open slice range
// over a list of length n.
func lrange(n, start, stop int64) (lo, hi int64) {
	if start < 0 {
		start += n
	}
	if stop < 0 {
		stop += n
	}
	start = max(start, 0)
	if start > stop || start >= n {
		return 0, 0
	}
	return start, min(stop, n-1) + 1
}
