package middleware

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonproxy/baton/state"
)

// kept holds the dedupe window's writes the store did not take: an answer
// the agent gave while the store was down (or slow past its timeout), or a
// claim that could not be released. The agent's answer already went to its
// caller, and its side effects are done: losing it would let the step run
// again when the chain is resumed. So the answer is kept in the process and
// written once the store answers (every keptRetry), and until then a
// duplicate that reaches this Baton is answered from here. A claim kept for
// release is taken over at once by the next request with its key, which
// would otherwise wait out the lease.
//
// What is kept is bounded (maxKeptBytes); past it an answer is in the log
// only, as one the window lost. Writes still kept when the process ends are
// lost with it, and were each logged when they were kept.
type kept struct {
	store DedupeStore
	log   *slog.Logger

	n       atomic.Int32 // len(writes), read without the lock on the hot path
	mu      sync.Mutex
	writes  map[string]*keptWrite // by store key
	size    int                   // bytes of the final answers kept
	running bool                  // a writer goroutine is storing them
}

// keptWrite is one window write the store did not take.
type keptWrite struct {
	pending []byte        // the claim it replaces
	final   []byte        // the entry to store; nil: release the claim
	ttl     time.Duration // the window, for a final answer
	until   time.Time     // the window's end: pointless to store after it
	edge    string
	waiting bool // write found another request's claim (logged once); only storeAll's goroutine sets it
}

// cost is what w kept for skey counts against maxKeptBytes: its bytes and
// its map entry's.
func (w *keptWrite) cost(skey string) int {
	return len(w.final) + len(w.pending) + len(skey) + 64
}

const (
	// keptRetry is how often kept writes are tried again.
	keptRetry = 250 * time.Millisecond
	// maxKeptBytes bounds the writes kept in the process.
	maxKeptBytes = 64 << 20
)

func newKept(store DedupeStore, log *slog.Logger) *kept {
	return &kept{store: store, log: log, writes: map[string]*keptWrite{}}
}

// keep holds w for skey and makes sure a writer stores it. It reports false
// when there is no room for it.
func (k *kept) keep(skey string, w *keptWrite) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if old := k.writes[skey]; old != nil {
		if old.final != nil && w.final == nil {
			return true // the answer kept is what the store must get; the claim goes with it
		}
		k.size -= old.cost(skey)
	}
	if k.size+w.cost(skey) > maxKeptBytes {
		return false
	}
	k.writes[skey] = w
	k.size += w.cost(skey)
	k.n.Store(int32(len(k.writes)))
	if !k.running {
		k.running = true
		go k.storeAll()
	}
	return true
}

// answer returns the final answer kept for skey, if any.
func (k *kept) answer(skey string) []byte {
	if k.n.Load() == 0 {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if w := k.writes[skey]; w != nil && time.Now().Before(w.until) {
		return w.final
	}
	return nil
}

// abandoned reports whether cur, the value the store holds for skey, is a
// claim of this process that is kept for release: no request holds it any
// more, and the next one with the key may take it over.
func (k *kept) abandoned(skey string, cur []byte) bool {
	if k.n.Load() == 0 {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	w := k.writes[skey]
	return w != nil && w.final == nil && bytes.Equal(w.pending, cur)
}

// takenOver forgets the release kept for skey: a request took the claim.
func (k *kept) takenOver(skey string) {
	k.mu.Lock()
	w := k.writes[skey]
	k.mu.Unlock()
	if w != nil && w.final == nil {
		k.done(skey, w)
	}
}

// done forgets the write kept for skey if it is still w.
func (k *kept) done(skey string, w *keptWrite) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.writes[skey] == w {
		delete(k.writes, skey)
		k.size -= w.cost(skey)
		k.n.Store(int32(len(k.writes)))
	}
}

// storeAll tries the kept writes every keptRetry until none is left.
func (k *kept) storeAll() {
	t := time.NewTicker(keptRetry)
	defer t.Stop()
	for range t.C {
		k.mu.Lock()
		if len(k.writes) == 0 {
			k.running = false
			k.mu.Unlock()
			return
		}
		batch := make(map[string]*keptWrite, len(k.writes))
		for skey, w := range k.writes {
			batch[skey] = w
		}
		k.mu.Unlock()
		for skey, w := range batch {
			err := k.write(skey, w)
			if errors.Is(err, errClaimInFlight) {
				continue // kept until that request lets the key go or answers it
			}
			if err != nil {
				break // the store is still down: next round
			}
			k.done(skey, w)
		}
	}
}

// errClaimInFlight: a kept answer meets another request's claim on its key
// (one that came once this claim lapsed). The answer is not given up for
// it: that request may fail and let the key go, and the answer is written
// then; if it answers, its answer is the window's and the kept one is let
// go.
var errClaimInFlight = errors.New("another request holds the key's claim")

// write makes one kept write; an error means the store did not answer, or
// (errClaimInFlight) that the write waits for another request's claim.
func (k *kept) write(skey string, w *keptWrite) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if w.final == nil {
		_, err := k.store.Release(ctx, skey, w.pending)
		return err
	}
	if time.Now().After(w.until) {
		return nil
	}
	stored, cur, err := storeFinal(ctx, k.store, skey, w.pending, w.final, time.Until(w.until))
	if err != nil {
		return err
	}
	switch e, bad := decodeEntry(cur); {
	case stored:
		k.log.Info("dedupe answer stored once the store answered again", slog.String("edge", w.edge))
	case bad == nil && e.state == statePending:
		if !w.waiting {
			w.waiting = true
			k.log.Info("dedupe answer kept: another request holds its key since this claim lapsed; written if it lets the key go",
				slog.String("edge", w.edge))
		}
		return errClaimInFlight
	default:
		k.log.Warn("dedupe answer not stored: another answer holds its key since this claim lapsed",
			slog.String("edge", w.edge))
	}
	return nil
}

// storeFinal stores a final entry in place of the claim pending, or, when
// the claim lapsed and no request took the key since, in its place. It
// reports false when another request holds the key, with what the key
// holds (nil when it is not known).
func storeFinal(ctx context.Context, store DedupeStore, skey string, pending, final []byte, ttl time.Duration) (bool, []byte, error) {
	ok, err := store.Swap(ctx, skey, pending, final, ttl)
	if err != nil || ok {
		return ok, nil, err
	}
	res, err := store.ClaimMany(ctx, []state.ClaimOp{{Key: skey, Val: final, TTL: ttl}})
	if err != nil {
		return false, nil, err
	}
	return res[0].OK, res[0].Cur, nil
}
