package state

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonproxy/baton/config"
)

// janitorEvery is how often the memory store's janitor reclaims expired
// entries. Reads never depend on it: expiry is checked on every access.
const janitorEvery = time.Second

// sweepBatch bounds how many expired entries the janitor frees per lock hold,
// so that a mass expiry does not stall requests.
const sweepBatch = 1024

// Memory is the in-process Store for a single Baton. It is bounded in entries
// and bytes (see NewMemory) and safe for concurrent use; one mutex guards it,
// and no operation walks the whole store: eviction order is an intrusive
// list and expiry a min-heap, so writes cost O(log n) plus whatever they
// evict, and index writes O(log n + members moved).
//
// Values are copied on the way in and on the way out, so callers may keep
// and modify what they pass and what they get. Operations ignore their
// context: none of them waits on anything but the mutex.
type Memory struct {
	maxEntries int64 // 0: unbounded
	maxBytes   int64 // 0: unbounded
	base       time.Time

	mu      sync.Mutex
	items   map[string]*entry
	lru     entry // sentinel of the evictable (non-held) entries, oldest first
	evCount int64 // weight of the evictable entries
	evBytes int64 // bytes of the evictable entries
	count   int64 // weight of all resident entries
	bytes   int64 // bytes of all resident entries
	expiry  expiryHeap
	// markSets counts the resident mark sets, so that MarksMayHold answers
	// a store with none (the common case: no untrusted content seen)
	// without taking mu, which every request's records take too.
	markSets atomic.Int64

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// kind is what an entry holds.
type kind uint8

const (
	kindValue kind = iota
	kindLog
	kindIndex
	kindMarks
	kindChain
)

// entry is one key. Its weight is what it counts against MaxEntries: 1 for a
// value, its length for a log, its member count for an index, and for a
// chain 1 plus its entries and attached values. A chain keeps its entries in
// log and its attached values in attached.
type entry struct {
	key      string
	kind     kind
	held     bool
	val      []byte
	log      [][]byte
	attached attachments
	idx      *sortedIndex
	marks    *markSet
	weight   int64
	size     int64
	expires  int64 // nanoseconds since Memory.base; 0: never
	heapAt   int   // index in Memory.expiry, -1 when not there
	prev     *entry
	next     *entry
}

// NewMemory returns an in-memory store bounded by cfg: MaxEntries counts
// values, log entries and index members; MaxBytes counts key bytes plus value
// bytes, log entry bytes and index member bytes (plus 8 per member for its
// score). Zero leaves a bound off; config.ApplyDefaults fills real defaults
// in. A background janitor reclaims expired entries until Close.
func NewMemory(cfg config.Memory) *Memory {
	return newMemory(cfg, janitorEvery)
}

func newMemory(cfg config.Memory, every time.Duration) *Memory {
	m := &Memory{
		maxEntries: int64(max(cfg.MaxEntries, 0)),
		maxBytes:   max(cfg.MaxBytes, 0),
		base:       time.Now(),
		items:      make(map[string]*entry),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	m.lru.prev, m.lru.next = &m.lru, &m.lru
	go m.janitor(every)
	return m
}

// Close stops the janitor and waits for it to exit. The store still answers
// afterwards, reclaiming expired entries only when it needs room. Close is
// idempotent and always returns nil.
func (m *Memory) Close() error {
	m.closeOnce.Do(func() {
		close(m.stop)
		<-m.done
	})
	return nil
}

// Usage reports how much of its bounds the store uses: entries as counted
// against MaxEntries and bytes as counted against MaxBytes. Expired entries
// count until they are reclaimed.
func (m *Memory) Usage() (entries, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count, m.bytes
}

func (m *Memory) janitor(every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.sweep()
		}
	}
}

// sweep frees every expired entry, sweepBatch at a time.
func (m *Memory) sweep() {
	for {
		m.mu.Lock()
		n := m.expire(m.now(), sweepBatch)
		m.mu.Unlock()
		if n < sweepBatch {
			return
		}
	}
}
