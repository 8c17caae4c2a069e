package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonproxy/baton/state"
)

// Store is what a Book needs of the state store.
type Store interface {
	AppendChained(ctx context.Context, links []state.Link) ([]state.LinkResult, error)
	ReadChain(ctx context.Context, log string) (state.Chain, error)
	ChainTails(ctx context.Context, logs []string) ([]string, error)
	Attached(ctx context.Context, log, name string) ([]byte, error)
	IndexAdd(ctx context.Context, key, member string, score float64, ttl time.Duration) error
	IndexRange(ctx context.Context, key string, min, max float64, offset, count int64) ([]state.Scored, error)
	IndexRemove(ctx context.Context, key, member string) error
	IndexCount(ctx context.Context, key string) (int64, error)
}

// InProcess is implemented by a store whose operations never leave the
// process (state.Memory), when InProcess reports true. A Book writes to such
// a store with Extend, which builds each entry on the chain's tail and
// builds it again should the chain move meanwhile, so that the Book keeps
// no tails; and it writes records none of whose writes are queued from the
// writer's goroutine: batching them through the flusher would share no
// round trip and only add two goroutine switches.
type InProcess interface {
	InProcess() bool
	Extend(log string, ttl time.Duration, build func(tail string) (entry []byte, attach []state.KV)) error
}

// ErrNotFound reports an unknown (or expired) record, and ErrUnknownPeer a
// record whose peer is no longer configured: its checkpoint cannot be sent.
var (
	ErrNotFound    = errors.New("record: not found")
	ErrUnknownPeer = errors.New("the record's peer is no longer configured")
)

// Book writes and reads records. Synchronous writes (Write) cost one
// pipelined round trip for any number of records; WriteLater queues a write
// for a background flusher that batches them, so outcomes are recorded off
// the request path. Nothing queued is dropped: Close flushes, a full queue
// makes the writer wait, and a write the store refuses is logged with the
// record (id, edge, request digest) and counted.
type Book struct {
	store     Store
	retention time.Duration
	log       *slog.Logger

	tails  tailCache
	probes probes // how reads of peers' traces' tails went (expect.go)
	// prefetch holds the tails read when a peer's handoff arrived
	// (prefetch.go).
	prefetch prefetches
	queue    *queue
	done     chan struct{}
	linger   time.Duration
	local    InProcess // the store, when it is in-process

	failed atomic.Int64
}

// queueSize bounds the records waiting for the flusher; flushBatch the
// records written per round trip.
const (
	queueSize  = 4096
	flushBatch = 128
	maxRelinks = 64
)

// NewBook returns a Book keeping records for retention. A nil store makes a
// Book that keeps nothing (records disabled): writes succeed without effect
// and reads find nothing.
func NewBook(store Store, retention time.Duration, log *slog.Logger) *Book {
	b := &Book{store: store, retention: retention, log: log,
		tails: tailCache{m: map[string]cachedTail{}, maxAge: retention / 2}, queue: newQueue(), done: make(chan struct{}),
		linger: linger}
	if ip, ok := store.(InProcess); ok && ip.InProcess() {
		b.local = ip
	}
	go b.flusher()
	return b
}

// Enabled reports whether the book keeps records at all.
func (b *Book) Enabled() bool { return b.store != nil }

// Failed returns how many record writes the store refused.
func (b *Book) Failed() int64 { return b.failed.Load() }

// queued is a snapshot waiting for the flusher; done, when set, hears the
// outcome of its write.
type queued struct {
	rec  Record
	done chan error
}

// Write stores the records now, each appended to its trace's chain, and
// returns once they are stored. Writes go through the flusher's queue like
// WriteLater's, so that the writes of one record land in the order they were
// made and concurrent writers share a round trip. To an in-process store,
// records none of whose writes went through the queue are written straight
// from the caller: nothing of theirs can land after them, and there is no
// round trip to share.
func (b *Book) Write(ctx context.Context, recs ...*Record) error {
	if b.store == nil {
		return nil
	}
	for _, r := range recs {
		r.encodeCheckpoint()
	}
	if b.local != nil && !anyQueued(recs) {
		return b.writeNow(ctx, recs)
	}
	done := make(chan error, len(recs))
	if !b.queue.push(done, recs...) { // closed
		return b.writeNow(ctx, recs)
	}
	var first error
	for range recs {
		select {
		case err := <-done:
			if err != nil && first == nil {
				first = err
			}
		case <-ctx.Done():
			return fmt.Errorf("record: writing: %w", ctx.Err())
		}
	}
	if first == nil {
		for _, r := range recs {
			r.wasStored()
		}
	}
	return first
}

// WriteLater queues a snapshot of rec for the background flusher; after
// Close it writes at once.
func (b *Book) WriteLater(rec *Record) {
	if b.store == nil {
		return
	}
	rec.encodeCheckpoint()
	if b.queue.push(nil, rec) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.writeNow(ctx, []*Record{rec})
}

// writeNow writes recs from the caller's goroutine, logging and counting
// what the store refuses.
func (b *Book) writeNow(ctx context.Context, recs []*Record) error {
	err := b.write(ctx, recs)
	if err != nil {
		b.lost(recs, err)
	}
	return err
}

// anyQueued reports whether a write of one of recs went through the queue
// (and may still be waiting there).
func anyQueued(recs []*Record) bool {
	for _, r := range recs {
		if r.queued {
			return true
		}
	}
	return false
}

// Close flushes what is queued and stops the flusher.
func (b *Book) Close() {
	b.queue.close()
	<-b.done
}

// linger is how long the flusher holds a batch that nobody waits on
// (outcomes and receipts) for more records, so that one round trip carries
// many: at a few thousand handoffs a second, tens of records instead of one
// or two. A record someone waits on (Write) flushes the batch at once.
const linger = 5 * time.Millisecond

func (b *Book) flusher() {
	defer close(b.done)
	var items []queued
	batch := make([]*Record, 0, flushBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		b.queue.wait()
		var closed bool
		if items, closed = b.queue.take(items[:0], flushBatch); len(items) == 0 {
			if closed {
				return
			}
			continue
		}
		items = b.collect(items, timer)
		batch = batch[:0]
		for i := range items {
			items[i].rec.waiter = items[i].done // told as soon as it is stored (wasStored)
			batch = append(batch, &items[i].rec)
		}
		err := b.flush(batch)
		if err != nil {
			b.lost(batch, err)
		}
		for i := range items {
			if w := items[i].rec.waiter; w != nil {
				w <- err // not stored (a nil error stores every record)
			}
		}
		clear(items) // the records' bytes are not kept until the next batch
		clear(batch)
	}
}

// flush writes a batch the flusher collected: to a remote store within ten
// seconds; an in-process store takes no context, and is spared the timer.
func (b *Book) flush(batch []*Record) error {
	if b.local != nil {
		return b.write(context.Background(), batch)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b.readTails(ctx, batch) // a peer's traces this Book has not linked to (expect.go)
	return b.write(ctx, batch)
}

// collect adds to items (what was queued when the batch began) what is
// queued, up to flushBatch. While no record in the batch has a writer
// waiting on it, it waits up to the book's linger for more.
func (b *Book) collect(items []queued, timer *time.Timer) []queued {
	if b.linger <= 0 || waitedOn(items) {
		return items
	}
	timer.Reset(b.linger)
	defer timer.Stop()
	for len(items) < flushBatch {
		select {
		case <-b.queue.ready:
		case <-timer.C:
			items, _ = b.queue.take(items, flushBatch)
			return items
		}
		from := len(items)
		var closed bool
		if items, closed = b.queue.take(items, flushBatch); closed || waitedOn(items[from:]) {
			return items
		}
	}
	return items
}

// waitedOn reports whether a writer waits on one of items.
func waitedOn(items []queued) bool {
	for i := range items {
		if items[i].done != nil {
			return true
		}
	}
	return false
}

// lost logs records the store refused, with what identifies the request, so
// that nothing is dropped silently.
func (b *Book) lost(recs []*Record, err error) {
	for _, r := range recs {
		if r.stored {
			continue // linked before the batch failed
		}
		b.failed.Add(1)
		b.log.Error("record not stored", "record_id", r.ID, "trace_id", r.TraceID, "edge", r.Edge(),
			"state", string(r.State), "status", r.Status, "idempotency_key", r.Key,
			"method", r.Method, "target", r.Target, "request_digest", r.RequestDigest, "error", err.Error())
	}
}

// write appends every record to its chain in one round trip, then relinks
// the ones that lost a race with another writer of the same trace; to an
// in-process store it extends each chain instead (state.Memory.Extend).
func (b *Book) write(ctx context.Context, recs []*Record) error {
	if b.store == nil {
		return nil
	}
	now := time.Now()
	if b.local != nil {
		return b.extend(recs, now)
	}
	pending := recs
	for round := 0; len(pending) > 0; round++ {
		if round == maxRelinks {
			return fmt.Errorf("record: chain contended: %d records not linked", len(pending))
		}
		if round > 0 {
			// Writers racing on one trace: back off with jitter so that one
			// of them wins the next round.
			time.Sleep(time.Duration(rand.Int64N(int64(round) * int64(200*time.Microsecond))))
		}
		links := make([]state.Link, len(pending))
		tails := make([]string, len(pending)) // the tail after each link
		for i, r := range pending {
			// A record follows the last one of its trace earlier in the batch
			// (batches are small and traces rarely repeat in one: a scan
			// costs less than a map), or else the tail last learned.
			tail, ok := "", false
			for j := i - 1; j >= 0 && !ok; j-- {
				if pending[j].TraceID == r.TraceID {
					tail, ok = tails[j], true
				}
			}
			if !ok {
				tail = b.tails.get(r.TraceID, now)
			}
			// The record lives in its trace's chain, without the checkpoint;
			// the checkpoint is attached to the chain, written once.
			entry, seq := encodeEntry(tail, r, now)
			var ttl time.Duration // 0: the chain keeps the TTL it has
			if b.tails.ttlDue(r.TraceID, b.retention, now) {
				ttl = b.retention
			}
			links[i] = state.Link{Log: chainKey(r.TraceID), Seq: int64(seq), Entry: entry, Attach: b.checkpoint(r), TTL: ttl}
			tails[i] = state.ChainTail(int64(seq), entry)
		}
		res, err := b.store.AppendChained(ctx, links)
		if err != nil {
			return fmt.Errorf("record: writing: %w", err)
		}
		for i := range links {
			if links[i].TTL > 0 {
				b.tails.ttlRefreshed(pending[i].TraceID, now)
			}
		}
		var retry []*Record
		var relearned map[string]bool
		for i, lr := range res {
			switch {
			case lr.Err != nil:
				return fmt.Errorf("record: writing %s: %w", pending[i].ID, lr.Err)
			case lr.OK:
				b.tails.set(pending[i].TraceID, tails[i], now)
				pending[i].wasStored()
			default:
				// Another writer linked first: learn its tail, try again. Later
				// records of the same trace in this batch failed too.
				if t := pending[i].TraceID; !relearned[t] {
					b.tails.set(t, lr.Tail, now)
					if relearned == nil {
						relearned = map[string]bool{}
					}
					relearned[t] = true
				}
				retry = append(retry, pending[i])
			}
		}
		pending = retry
	}
	return nil
}

// extend appends each record to its chain in an in-process store.
func (b *Book) extend(recs []*Record, now time.Time) error {
	for _, r := range recs {
		attach := b.checkpoint(r)
		err := b.local.Extend(chainKey(r.TraceID), b.retention, func(tail string) ([]byte, []state.KV) {
			entry, _ := encodeEntry(tail, r, now)
			return entry, attach
		})
		if err != nil {
			return fmt.Errorf("record: writing %s: %w", r.ID, err)
		}
		r.wasStored()
	}
	return nil
}

// checkpoint is what a write of r attaches to its chain: its checkpoint,
// until it is stored.
func (b *Book) checkpoint(r *Record) []state.KV {
	if r.checkpoint == nil {
		return nil
	}
	return []state.KV{{Key: checkpointName(r.ID), Val: r.checkpoint}}
}

// Get returns a record with its checkpoint.
func (b *Book) Get(ctx context.Context, id string) (*Record, error) {
	if TraceOf(id) == "" || b.store == nil {
		return nil, ErrNotFound
	}
	// A record's latest state is its snapshot in its trace's chain with the
	// updates after it applied.
	log := chainKey(TraceOf(id))
	c, err := b.store.ReadChain(ctx, log)
	if err != nil {
		return nil, fmt.Errorf("record: reading %s: %w", id, err)
	}
	var entries []Entry
	marker := []byte(`"id":"` + id + `"`)
	for _, b := range c.Entries {
		if !bytes.Contains(b, marker) {
			continue
		}
		var e Entry
		if json.Unmarshal(b, &e) == nil && e.RecordID() == id {
			entries = append(entries, e)
		}
	}
	recs := Merge(entries)
	if len(recs) == 0 {
		return nil, ErrNotFound
	}
	r := recs[0]
	r.stored = true // what it writes next is an Update
	if r.Side == Egress {
		cp, err := b.store.Attached(ctx, log, checkpointName(id))
		switch {
		case err == nil:
			r.Request = &Request{}
			if err := json.Unmarshal(cp, r.Request); err != nil {
				return nil, fmt.Errorf("record: decoding the checkpoint of %s: %w", id, err)
			}
			r.checkpointed = true
		case !errors.Is(err, state.ErrNotFound):
			return nil, fmt.Errorf("record: reading the checkpoint of %s: %w", id, err)
		}
	}
	return &r, nil
}

// Trace is a trace's chain as stored: the raw entries (for Verify), the
// tail, and the latest state of each record in order of creation.
type Trace struct {
	TraceID string
	Entries [][]byte
	Tail    string
	Records []Record
}

// Trace reads a trace's chain.
func (b *Book) Trace(ctx context.Context, traceID string) (*Trace, error) {
	if b.store == nil {
		return &Trace{TraceID: traceID}, nil
	}
	c, err := b.store.ReadChain(ctx, chainKey(traceID))
	if err != nil {
		return nil, fmt.Errorf("record: reading trace %s: %w", traceID, err)
	}
	entries, tail := c.Entries, c.Tail
	recs := Merge(Decode(entries))
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].Created.Equal(recs[j].Created) {
			return recs[i].Created.Before(recs[j].Created)
		}
		return recs[i].ID < recs[j].ID
	})
	return &Trace{TraceID: traceID, Entries: entries, Tail: tail, Records: recs}, nil
}

// listed pages through the records an index lists (what names the list in
// errors), those scored up to until, and returns the page and the index's
// length. A record gone with its retention is skipped.
func (b *Book) listed(ctx context.Context, key, what string, until float64, offset, limit int) ([]Record, int64, error) {
	if b.store == nil {
		return nil, 0, nil
	}
	total, err := b.store.IndexCount(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("record: counting %s: %w", what, err)
	}
	members, err := b.store.IndexRange(ctx, key, 0, until, int64(offset), int64(limit))
	if err != nil {
		return nil, 0, fmt.Errorf("record: listing %s: %w", what, err)
	}
	out := make([]Record, 0, len(members))
	for _, m := range members {
		r, err := b.Get(ctx, m.Member)
		if errors.Is(err, ErrNotFound) {
			continue // expired with its retention
		}
		if err != nil {
			return nil, 0, err
		}
		out = append(out, *r)
	}
	return out, total, nil
}

// tailCache remembers the last tail this process wrote or learned per trace
// in a shared store; a Book writing to an in-process store needs none. It is
// bounded: when full it is emptied (a miss costs one extra round trip, never
// correctness). A tail older than maxAge is forgotten: the chain may have
// expired since, and a writer must not number its entry after entries that
// are gone (Redis only checks that the number is free).
type tailCache struct {
	mu     sync.Mutex
	m      map[string]cachedTail
	maxAge time.Duration // 0: no limit
}

type cachedTail struct {
	tail  string
	at    time.Time
	ttlAt time.Time // when this Book last refreshed the chain's TTL
}

const tailCacheSize = 1 << 16

func (c *tailCache) get(trace string, now time.Time) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[trace]
	if !ok || (c.maxAge > 0 && now.Sub(t.at) > c.maxAge) {
		return ""
	}
	return t.tail
}

func (c *tailCache) set(trace, tail string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= tailCacheSize {
		clear(c.m)
	}
	t := c.m[trace]
	t.tail, t.at = tail, now
	c.m[trace] = t
}

// ttlRefresh bounds how long a chain's TTL goes unrefreshed by a Book that
// writes to it: a chain lives at least its retention, less this, after
// its last record.
const ttlRefresh = time.Hour

// ttlDue reports whether this Book's next link to the chain of trace should
// refresh the chain's TTL: it has not in the last min(ttlRefresh,
// retention/8). The other links leave the TTL alone, a command less each.
func (c *tailCache) ttlDue(trace string, retention time.Duration, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[trace]
	return !ok || now.Sub(t.ttlAt) > min(ttlRefresh, retention/8)
}

// ttlRefreshed notes that a link refreshed the chain's TTL (whether or not
// the link itself landed: the refresh goes out with it).
func (c *tailCache) ttlRefreshed(trace string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= tailCacheSize {
		clear(c.m)
	}
	t := c.m[trace]
	t.ttlAt = now
	c.m[trace] = t
}
