package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
)

// measuredStore is the state store with each call timed (baton.store.duration)
// and each failure counted (baton.store.errors), labelled by operation. A
// missing key is an answer, not a failure. Operations it does not list pass
// straight through to the store.
type measuredStore struct {
	state.Store
	ops [nStoreOps]*middleware.StoreSeries
	// indexed hears of every index change: the dead-letter index is the one
	// Baton keeps, and its depth is recounted after this Baton changes it.
	indexed func()
}

// The operations measured, and their op label.
const (
	opClaim = iota
	opClaimMany
	opRenew
	opSwap
	opRelease
	opGet
	opSet
	opDelete
	opAppend
	opRange
	opIndexAdd
	opIndexIncr
	opIndexRange
	opIndexRemove
	opIndexCount
	opAppendChained
	opReadChain
	opAttached
	opMarkAdd
	opMarkLookup
	opPing
	opTouch
	opAppendCounting
	opChainTails
	nStoreOps
)

var storeOpNames = [nStoreOps]string{"claim", "claim_many", "renew", "swap", "release", "get", "set", "delete",
	"append", "range", "index_add", "index_incr", "index_range", "index_remove", "index_count", "append_chained", "read_chain",
	"attached", "mark_add",
	"mark_lookup", "ping", "touch", "append_counting", "chain_tails"}

// measureStore wraps s; without metrics it is s.
func measureStore(s state.Store, m *middleware.Metrics, indexed func()) state.Store {
	if m == nil {
		return s
	}
	ms := &measuredStore{Store: s, indexed: indexed}
	for i, name := range storeOpNames {
		ms.ops[i] = m.Store(name)
	}
	return ms
}

// failed reports an error that counts against the store.
func failed(err error) error {
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	return err
}

func (s *measuredStore) Claim(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, []byte, error) {
	start := time.Now()
	ok, cur, err := s.Store.Claim(ctx, key, val, ttl)
	s.ops[opClaim].Done(start, err)
	return ok, cur, err
}

func (s *measuredStore) ClaimMany(ctx context.Context, ops []state.ClaimOp) ([]state.ClaimResult, error) {
	start := time.Now()
	res, err := s.Store.ClaimMany(ctx, ops)
	s.ops[opClaimMany].Done(start, err)
	return res, err
}

func (s *measuredStore) Renew(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	start := time.Now()
	ok, err := s.Store.Renew(ctx, key, val, ttl)
	s.ops[opRenew].Done(start, err)
	return ok, err
}

func (s *measuredStore) Touch(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	start := time.Now()
	ok, err := s.Store.Touch(ctx, key, ttl)
	s.ops[opTouch].Done(start, err)
	return ok, err
}

func (s *measuredStore) Swap(ctx context.Context, key string, prev, next []byte, ttl time.Duration) (bool, error) {
	start := time.Now()
	ok, err := s.Store.Swap(ctx, key, prev, next, ttl)
	s.ops[opSwap].Done(start, err)
	return ok, err
}

func (s *measuredStore) Release(ctx context.Context, key string, val []byte) (bool, error) {
	start := time.Now()
	ok, err := s.Store.Release(ctx, key, val)
	s.ops[opRelease].Done(start, err)
	return ok, err
}

func (s *measuredStore) Get(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	v, err := s.Store.Get(ctx, key)
	s.ops[opGet].Done(start, failed(err))
	return v, err
}

func (s *measuredStore) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	start := time.Now()
	err := s.Store.Set(ctx, key, val, ttl)
	s.ops[opSet].Done(start, err)
	return err
}

func (s *measuredStore) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := s.Store.Delete(ctx, key)
	s.ops[opDelete].Done(start, err)
	return err
}

func (s *measuredStore) Append(ctx context.Context, key string, val []byte, ttl time.Duration) (int64, error) {
	start := time.Now()
	n, err := s.Store.Append(ctx, key, val, ttl)
	s.ops[opAppend].Done(start, err)
	return n, err
}

func (s *measuredStore) AppendCounting(ctx context.Context, key string, val []byte, ttl time.Duration, counts state.Counts) (int64, error) {
	start := time.Now()
	n, err := s.Store.AppendCounting(ctx, key, val, ttl, counts)
	s.ops[opAppendCounting].Done(start, err)
	s.indexed()
	return n, err
}

func (s *measuredStore) Range(ctx context.Context, key string, start, stop int64) ([][]byte, error) {
	t := time.Now()
	v, err := s.Store.Range(ctx, key, start, stop)
	s.ops[opRange].Done(t, err)
	return v, err
}

func (s *measuredStore) IndexAdd(ctx context.Context, key, member string, score float64, ttl time.Duration) error {
	start := time.Now()
	err := s.Store.IndexAdd(ctx, key, member, score, ttl)
	s.ops[opIndexAdd].Done(start, err)
	s.indexed()
	return err
}

func (s *measuredStore) IndexIncr(ctx context.Context, key string, deltas []state.Scored, ttl time.Duration) ([]float64, error) {
	start := time.Now()
	v, err := s.Store.IndexIncr(ctx, key, deltas, ttl)
	s.ops[opIndexIncr].Done(start, err)
	s.indexed()
	return v, err
}

func (s *measuredStore) IndexRange(ctx context.Context, key string, min, max float64, offset, count int64) ([]state.Scored, error) {
	start := time.Now()
	v, err := s.Store.IndexRange(ctx, key, min, max, offset, count)
	s.ops[opIndexRange].Done(start, err)
	return v, err
}

func (s *measuredStore) IndexRemove(ctx context.Context, key, member string) error {
	start := time.Now()
	err := s.Store.IndexRemove(ctx, key, member)
	s.ops[opIndexRemove].Done(start, err)
	s.indexed()
	return err
}

func (s *measuredStore) IndexCount(ctx context.Context, key string) (int64, error) {
	start := time.Now()
	n, err := s.Store.IndexCount(ctx, key)
	s.ops[opIndexCount].Done(start, err)
	return n, err
}

func (s *measuredStore) AppendChained(ctx context.Context, links []state.Link) ([]state.LinkResult, error) {
	start := time.Now()
	res, err := s.Store.AppendChained(ctx, links)
	s.ops[opAppendChained].Done(start, err)
	return res, err
}

func (s *measuredStore) ChainTails(ctx context.Context, logs []string) ([]string, error) {
	start := time.Now()
	tails, err := s.Store.ChainTails(ctx, logs)
	s.ops[opChainTails].Done(start, err)
	return tails, err
}

func (s *measuredStore) ReadChain(ctx context.Context, log string) (state.Chain, error) {
	start := time.Now()
	c, err := s.Store.ReadChain(ctx, log)
	s.ops[opReadChain].Done(start, err)
	return c, err
}

func (s *measuredStore) Attached(ctx context.Context, log, name string) ([]byte, error) {
	start := time.Now()
	v, err := s.Store.Attached(ctx, log, name)
	s.ops[opAttached].Done(start, failed(err))
	return v, err
}

func (s *measuredStore) MarkAdd(ctx context.Context, key string, members []uint64, val string, ttl time.Duration, max int) error {
	start := time.Now()
	err := s.Store.MarkAdd(ctx, key, members, val, ttl, max)
	s.ops[opMarkAdd].Done(start, err)
	return err
}

func (s *measuredStore) MarkLookup(ctx context.Context, key string, members []uint64) ([]string, error) {
	start := time.Now()
	v, err := s.Store.MarkLookup(ctx, key, members)
	s.ops[opMarkLookup].Done(start, err)
	return v, err
}

func (s *measuredStore) Ping(ctx context.Context) error {
	start := time.Now()
	err := s.Store.Ping(ctx)
	s.ops[opPing].Done(start, err)
	return err
}

// InProcess reports whether the wrapped store is in-process (see
// record.InProcess).
func (s *measuredStore) InProcess() bool {
	ip, ok := s.Store.(record.InProcess)
	return ok && ip.InProcess()
}

// Extend is the in-process store's chained append, timed as append_chained:
// to whoever reads the metrics it is the same operation.
func (s *measuredStore) Extend(log string, ttl time.Duration, build func(tail string) ([]byte, []state.KV)) error {
	ip, ok := s.Store.(record.InProcess)
	if !ok {
		return errors.New("proxy: the store is not in-process")
	}
	start := time.Now()
	err := ip.Extend(log, ttl, build)
	s.ops[opAppendChained].Done(start, err)
	return err
}
