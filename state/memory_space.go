package state

import "time"

// This file holds the memory store's bookkeeping: the key map, the eviction
// list of non-held entries (least recently written first), the expiry heap,
// and the bounds. Every function here expects m.mu to be held.

// now is the monotonic time since the store was made, in nanoseconds.
func (m *Memory) now() int64 { return int64(time.Since(m.base)) }

// deadline turns a ttl into an expiry time; ttl <= 0 never expires.
func deadline(now int64, ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	return now + int64(ttl)
}

// live returns key's entry, or nil when it is absent or expired (an expired
// entry is removed on the spot, so expiry is exact on read).
func (m *Memory) live(key string, now int64) *entry {
	e := m.items[key]
	if e == nil {
		return nil
	}
	if e.expires != 0 && e.expires <= now {
		m.remove(e)
		return nil
	}
	return e
}

// insert adds an empty entry for key; the caller then fills it and accounts
// for it with resize.
func (m *Memory) insert(key string, k kind) *entry {
	e := &entry{key: key, kind: k, heapAt: -1}
	m.items[key] = e
	if k == kindMarks {
		m.markSets.Add(1)
	}
	return e
}

// remove drops e from the store and from the totals.
func (m *Memory) remove(e *entry) {
	delete(m.items, e.key)
	if e.kind == kindMarks {
		m.markSets.Add(-1)
	}
	m.unlink(e)
	if e.heapAt >= 0 {
		m.expiry.remove(e.heapAt)
	}
	m.count -= e.weight
	m.bytes -= e.size
}

// resize changes e's weight and size by the given deltas.
func (m *Memory) resize(e *entry, dWeight, dSize int64) {
	e.weight += dWeight
	e.size += dSize
	m.count += dWeight
	m.bytes += dSize
	if e.prev != nil {
		m.evCount += dWeight
		m.evBytes += dSize
	}
}

// written records a write to e: a held entry leaves the eviction list, any
// other moves to its newest end.
func (m *Memory) written(e *entry) {
	m.unlink(e)
	if e.held {
		return
	}
	e.prev, e.next = m.lru.prev, &m.lru
	e.prev.next, m.lru.prev = e, e
	m.evCount += e.weight
	m.evBytes += e.size
}

func (m *Memory) unlink(e *entry) {
	if e.prev == nil {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	m.evCount -= e.weight
	m.evBytes -= e.size
}

// expireAt sets e's expiry time (0: never) and keeps the heap in step.
func (m *Memory) expireAt(e *entry, at int64) {
	e.expires = at
	switch {
	case at == 0 && e.heapAt >= 0:
		m.expiry.remove(e.heapAt)
	case at != 0 && e.heapAt >= 0:
		m.expiry.update(e)
	case at != 0:
		m.expiry.push(e)
	}
}

// expire removes up to limit expired entries (limit <= 0: all of them) and
// returns how many it removed.
func (m *Memory) expire(now int64, limit int) int {
	n := 0
	for len(m.expiry) > 0 && (limit <= 0 || n < limit) {
		if m.expiry[0].at > now {
			break
		}
		m.remove(m.expiry[0].e)
		n++
	}
	return n
}

// fits reports whether the store stays within its bounds after a write that
// changes the totals by dWeight and dSize.
func (m *Memory) fits(dWeight, dSize int64) bool {
	return (m.maxEntries == 0 || m.count+dWeight <= m.maxEntries) &&
		(m.maxBytes == 0 || m.bytes+dSize <= m.maxBytes)
}

// makeRoom frees space for a write that changes the totals by dWeight and
// dSize, where target (nil for a new key) is the live entry being written,
// which is never evicted for its own write. Expired entries go first, then
// the least recently written non-held entries. When even evicting all of
// those would not make room it evicts nothing and returns ErrFull.
func (m *Memory) makeRoom(now int64, target *entry, dWeight, dSize int64) error {
	if m.fits(dWeight, dSize) {
		return nil
	}
	m.expire(now, 0)
	if m.fits(dWeight, dSize) {
		return nil
	}
	evCount, evBytes := m.evCount, m.evBytes
	if target != nil && target.prev != nil {
		evCount -= target.weight
		evBytes -= target.size
	}
	if (m.maxEntries != 0 && m.count+dWeight-evCount > m.maxEntries) ||
		(m.maxBytes != 0 && m.bytes+dSize-evBytes > m.maxBytes) {
		return ErrFull
	}
	for e := m.lru.next; e != &m.lru && !m.fits(dWeight, dSize); {
		next := e.next
		if e != target {
			m.remove(e)
		}
		e = next
	}
	return nil
}

// expiryHeap is a min-heap of entries by expiry time. It is written out
// rather than built on container/heap to keep entries' positions in step
// without interface conversions on every write, and each slot holds its
// entry's expiry time so that sifting compares slots without loading the
// entries (a cache miss each in a store of many thousands).
type expiryHeap []heapSlot

type heapSlot struct {
	at int64 // the entry's expires
	e  *entry
}

func (h *expiryHeap) push(e *entry) {
	e.heapAt = len(*h)
	*h = append(*h, heapSlot{at: e.expires, e: e})
	h.up(e.heapAt)
}

func (h *expiryHeap) remove(i int) {
	s := *h
	last := len(s) - 1
	s[i].e.heapAt = -1
	if i != last {
		s[i] = s[last]
		s[i].e.heapAt = i
	}
	s[last] = heapSlot{}
	*h = s[:last]
	if i != last {
		h.fix(i)
	}
}

// update moves e, already in the heap, to its new expiry time.
func (h expiryHeap) update(e *entry) {
	h[e.heapAt].at = e.expires
	h.fix(e.heapAt)
}

func (h expiryHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h expiryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= h[i].at {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down sifts i towards the leaves and reports whether it moved.
func (h expiryHeap) down(i int) bool {
	start := i
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r].at < h[c].at {
			c = r
		}
		if h[i].at <= h[c].at {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}

func (h expiryHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].e.heapAt = i
	h[j].e.heapAt = j
}
