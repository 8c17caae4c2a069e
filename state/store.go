package state

import (
	"context"
	"errors"
	"time"

	"github.com/batonproxy/baton/config"
)

// ErrNotFound is returned by Get when the key is absent or expired.
var ErrNotFound = errors.New("state: not found")

// ErrFull is returned by a memory store write when the store is at a bound
// and everything that could be evicted to make room is a held claim.
var ErrFull = errors.New("state: memory store full")

// ErrWrongKind is returned when an operation meets a key that holds another
// kind of data, such as Get on a log or Append on a plain value.
var ErrWrongKind = errors.New("state: key holds another kind of value")

// Store is Baton's hot-state store. Every method is safe for concurrent use.
// A ttl <= 0 means no expiry.
type Store interface {
	// Claim sets key to val with ttl only if key is absent (atomic). ok=false returns the current value.
	// A claimed entry is "held": the memory store never evicts it for capacity, only when its TTL lapses.
	Claim(ctx context.Context, key string, val []byte, ttl time.Duration) (ok bool, cur []byte, err error)
	// Renew extends key's TTL only if its value still equals val (the holder renewing its lease). Stays held.
	Renew(ctx context.Context, key string, val []byte, ttl time.Duration) (ok bool, err error)
	// Swap replaces key's value with next (and ttl) only if it currently equals prev (compare-and-set).
	// The entry stops being held. An absent key never matches.
	Swap(ctx context.Context, key string, prev, next []byte, ttl time.Duration) (ok bool, err error)
	// Release deletes key only if its value equals val.
	Release(ctx context.Context, key string, val []byte) (ok bool, err error)
	// Get returns a copy of key's value, or ErrNotFound when it is absent or expired.
	Get(ctx context.Context, key string) ([]byte, error)
	// Set writes key unconditionally; ttl 0 means no expiry. The entry is not held.
	// Touch sets the ttl of key's value (0: no expiry) and reports whether key
	// holds one: an existence check that moves no value, for content written once.
	Touch(ctx context.Context, key string, ttl time.Duration) (bool, error)
	Set(ctx context.Context, key string, val []byte, ttl time.Duration) error
	// Delete removes key of any kind; deleting an absent key is not an error.
	Delete(ctx context.Context, key string) error
	// Append adds val at the end of the ordered log at key, refreshing the log's ttl; returns the new length.
	Append(ctx context.Context, key string, val []byte, ttl time.Duration) (int64, error)
	// Range returns log entries start..stop inclusive, Redis LRANGE semantics (negative indexes from the end).
	// An absent log is empty.
	Range(ctx context.Context, key string, start, stop int64) ([][]byte, error)
	// IndexAdd adds or updates member with score in the sorted index at key, refreshing the index's ttl.
	IndexAdd(ctx context.Context, key, member string, score float64, ttl time.Duration) error
	// IndexIncr adds each delta's Score to its Member's score in the index
	// at key (an absent member counts from 0), each add atomic, and
	// refreshes the index's ttl, in one round trip; it returns the members'
	// scores after, in order: counters that several Batons add to.
	IndexIncr(ctx context.Context, key string, deltas []Scored, ttl time.Duration) ([]float64, error)
	// AppendCounting appends val to the log at key as Append does and adds
	// counts to their index as IndexIncr does, in the same round trip: a
	// write that rides on another (a model call's spend on the journal's
	// append of its answer).
	AppendCounting(ctx context.Context, key string, val []byte, ttl time.Duration, counts Counts) (int64, error)
	// IndexRange returns members with min <= score <= max in ascending score order (ties by member),
	// skipping offset, at most count (count<=0: all).
	IndexRange(ctx context.Context, key string, min, max float64, offset, count int64) ([]Scored, error)
	// IndexRemove removes member from the index at key; a missing member is not an error.
	IndexRemove(ctx context.Context, key, member string) error
	// IndexCount returns the number of members in the index at key (0 when absent).
	IndexCount(ctx context.Context, key string) (int64, error)
	// AppendChained applies links in order, each atomically (see Link). A
	// batch with one link per chain costs one round trip; each further link
	// of one chain in the batch costs Redis one more. The error is for the
	// batch; per-link failures are in the results.
	AppendChained(ctx context.Context, links []Link) ([]LinkResult, error)
	// ReadChain returns the chain at log: its entries in order and its
	// tail. An absent chain is empty.
	ReadChain(ctx context.Context, log string) (Chain, error)
	// ChainTails returns the tail of each chain at logs (the ChainTail of
	// its last entry), "" for one with no entries: what a writer that has
	// not linked to a chain yet needs to link to it at once. One round trip
	// for any number of chains shorter than a probe (16 entries in Redis).
	ChainTails(ctx context.Context, logs []string) ([]string, error)
	// Attached returns the value a link attached to the chain at log under
	// name, or ErrNotFound.
	Attached(ctx context.Context, log, name string) ([]byte, error)
	// ClaimMany applies several claims as Claim does, in one round trip
	// (each claim atomic on its own, not the batch).
	ClaimMany(ctx context.Context, ops []ClaimOp) ([]ClaimResult, error)
	// Ping reports whether the store can serve requests.
	// MarkAdd adds members to the mark set at key, each with val (replacing
	// a member's earlier value), and sets the set's TTL. The set is bounded
	// by max members: it is kept in two generations, and when the newer one
	// reaches max/2 members it becomes the older and the older is dropped
	// whole, so a set never holds more than max members plus one call's
	// worth, and the members kept are the most recently added.
	MarkAdd(ctx context.Context, key string, members []uint64, val string, ttl time.Duration, max int) error
	// MarkLookup returns, for each member, the value it was added with, or
	// "" when the set at key does not hold it. One round trip.
	MarkLookup(ctx context.Context, key string, members []uint64) ([]string, error)
	// MarksMayHold reports whether the mark set at key may hold members.
	// It is false only when the store knows, without a round trip, that the
	// set is empty or absent (the memory store); a caller may then skip the
	// work of a lookup that could find nothing. A store that cannot know
	// without asking (Redis) says true.
	MarksMayHold(key string) bool
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}

// Scored is an index member with its score.
type Scored struct {
	Member string
	Score  float64
}

// Counts is an IndexIncr of the index at Key, made with another write.
type Counts struct {
	Key    string
	Deltas []Scored
	TTL    time.Duration
}

// Open returns the store cfg selects: Redis when cfg.Redis is set, otherwise
// an in-memory store bounded by cfg.Memory.
func Open(cfg config.Store) (Store, error) {
	if cfg.Redis != nil {
		r, err := NewRedis(*cfg.Redis)
		if err != nil {
			return nil, err // already says "state: redis: ..."
		}
		return r, nil
	}
	return NewMemory(cfg.Memory), nil
}
