package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Holder is this process as the holder of claims in the store (the dedupe
// window's in-flight claims): an incarnation id each claim names, and a
// liveness mark the store keeps for it, renewed every third of Timeout. A
// claim whose holder's mark is gone is free at once, for the next request
// with its key, instead of waiting out the claim's lease:
//
//   - a Baton that starts again declares its replica's previous incarnation
//     dead, so the claims its predecessor held when it died are free as
//     soon as it listens;
//   - any Baton may take over a claim whose holder's mark expired, once it
//     has itself seen the store answer for a whole Timeout (a store that
//     was down let every mark expire, live holders' too; they renew within
//     a third of Timeout of its return).
//
// A holder that finds its own mark gone (it was paused, or cut off from the
// store, longer than Timeout) may have been taken for dead: it begins a new
// incarnation, and Changed tells its claims to make themselves its own
// again (a compare-and-set that fails where another request took the claim
// over meanwhile, which fences the paused holder's writes).
type Holder struct {
	store   Store
	timeout time.Duration
	log     *slog.Logger

	id      atomic.Pointer[HolderID]
	lapse   atomic.Bool  // Run leaves the mark to lapse instead of marking it dead
	upSince atomic.Int64 // unix nanoseconds the store has answered since; 0: it did not answer last
	renewed atomic.Int64 // unix nanoseconds of the mark's last write
	renewMu sync.Mutex   // one renewal at a time
	replica string       // what this process takes the place of (Begin)
	named   time.Time    // when the replica's key was last written

	mu      sync.Mutex
	changed chan struct{}             // closed when a new incarnation begins
	past    map[HolderID]bool         // this process's earlier incarnations: its own requests still own their claims
	watches map[*holderWatch]struct{} // AfterChange's, until the incarnation changes or they are stopped
}

// holderWatch is one AfterChange.
type holderWatch struct{ f func() }

// HolderID is an incarnation id.
type HolderID [16]byte

func (id HolderID) String() string { return hex.EncodeToString(id[:]) }

// Liveness mark values, and how long a dead mark is kept (past it, the
// mark is absent, which also means dead).
const (
	markLive    = "live"
	markDead    = "dead"
	deadMarkTTL = time.Minute
)

// maxPast bounds the earlier incarnations a process remembers as its own.
const maxPast = 1024

// DefaultHolderTimeout is how long a holder's mark outlives its last
// renewal.
const DefaultHolderTimeout = 3 * time.Second

// NewHolder returns the holder of this process's claims in store; timeout
// is how long its mark outlives a renewal.
func NewHolder(store Store, timeout time.Duration, log *slog.Logger) *Holder {
	if timeout <= 0 {
		timeout = DefaultHolderTimeout
	}
	h := &Holder{store: store, timeout: timeout, log: log, changed: make(chan struct{}), past: map[HolderID]bool{},
		watches: map[*holderWatch]struct{}{}}
	h.id.Store(newHolderID())
	return h
}

func newHolderID() *HolderID {
	var id HolderID
	_, _ = rand.Read(id[:])
	return &id
}

func markKey(id HolderID) string { return "holder/" + id.String() }

// ID returns the current incarnation.
func (h *Holder) ID() HolderID { return *h.id.Load() }

// Changed returns a channel closed when the incarnation that is current
// now is replaced.
func (h *Holder) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// AfterChange arranges for f to run, in a goroutine of its own, when the
// incarnation that since (a channel from Changed) belongs to is replaced:
// at once when it already has been. It is to Changed what context.AfterFunc
// is to a context's Done: a claim can be told of a change with no
// goroutine of its own waiting for it. stop unregisters f and reports
// whether it did so before f was started.
func (h *Holder) AfterChange(since <-chan struct{}, f func()) (stop func() bool) {
	w := &holderWatch{f: f}
	h.mu.Lock()
	if since != h.changed {
		h.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	h.watches[w] = struct{}{}
	h.mu.Unlock()
	return func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		_, ok := h.watches[w]
		delete(h.watches, w)
		return ok
	}
}

// Begin writes the liveness mark and declares the previous incarnation of
// replica dead: replica names what a process that starts again takes the
// place of (a host, an agent and a listener, which two live processes
// cannot share; "": none). Call it before serving: a claim whose holder has
// no mark may be taken over. A store that does not answer is not an error
// here: Run writes the mark once it does (no claim is made meanwhile).
func (h *Holder) Begin(ctx context.Context, replica string) {
	h.renewMu.Lock()
	defer h.renewMu.Unlock()
	h.replica = replica
	if err := h.begin(ctx); err != nil {
		h.log.Warn("holder mark not written yet: written when the store answers", "error", err.Error())
	}
}

// replicaTTL is how long a replica's key names its process; Run writes it
// again every replicaTTL/24.
const replicaTTL = 24 * time.Hour

// begin writes the current incarnation's mark and, the first time, declares
// the replica's previous incarnation dead. Called holding renewMu.
func (h *Holder) begin(ctx context.Context) error {
	id := h.ID()
	ctx, cancel := context.WithTimeout(ctx, h.timeout/3)
	defer cancel()
	now := time.Now() // the mark lives from before it is written
	if err := h.store.Set(ctx, markKey(id), []byte(markLive), h.timeout); err != nil {
		return err
	}
	h.upSince.Store(now.UnixNano())
	h.renewed.Store(now.UnixNano())
	if h.replica == "" {
		return nil
	}
	rkey := "replica/" + h.replica
	prev, err := h.store.Get(ctx, rkey)
	if err == nil && len(prev) == 2*len(HolderID{}) && string(prev) != id.String() {
		if err := h.store.Set(ctx, "holder/"+string(prev), []byte(markDead), deadMarkTTL); err == nil {
			h.log.Info("claims of this replica's previous process freed", "previous", string(prev))
		}
	}
	if h.store.Set(ctx, rkey, []byte(id.String()), replicaTTL) == nil {
		h.named = now
	}
	return nil
}

// Run renews the mark every third of the timeout until ctx ends, then
// marks this incarnation dead (its claims are freed at once).
func (h *Holder) Run(ctx context.Context) {
	t := time.NewTicker(h.timeout / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if !h.lapse.Load() {
				end, cancel := context.WithTimeout(context.Background(), h.timeout)
				_ = h.store.Set(end, markKey(h.ID()), []byte(markDead), deadMarkTTL)
				cancel()
			}
			return
		case <-t.C:
		}
		h.renew(ctx)
	}
}

// Lapse has Run leave the mark to lapse when it ends, instead of declaring
// this process dead at once: for a process stopping with requests still
// being delivered (a drain cut short), whose claims must not be freed
// before the timeout.
func (h *Holder) Lapse() { h.lapse.Store(true) }

// Fresh reports whether the mark was written recently enough that no other
// Baton can have found it gone: within two thirds of the timeout.
func (h *Holder) Fresh() bool {
	return time.Since(time.Unix(0, h.renewed.Load())) < h.timeout*2/3
}

// Confirm renews the mark now unless it is fresh: after it, either the
// current incarnation's mark is live, or (the mark had lapsed) a new
// incarnation's is, or the store did not answer. It reports whether the
// mark is fresh after.
func (h *Holder) Confirm(ctx context.Context) bool {
	if !h.Fresh() {
		h.renew(ctx)
	}
	return h.Fresh()
}

// renew extends the mark while it says live; when it is gone, a new
// incarnation begins.
func (h *Holder) renew(ctx context.Context) {
	h.renewMu.Lock()
	defer h.renewMu.Unlock()
	start := time.Now()
	last := h.renewed.Load()
	if last == 0 {
		_ = h.begin(ctx) // the store did not answer at Begin
		return
	}
	if start.Sub(time.Unix(0, last)) < h.timeout/6 {
		return // renewed meanwhile, by the loop or another Confirm
	}
	rctx, cancel := context.WithTimeout(ctx, h.timeout/3)
	defer cancel()
	id := h.ID()
	ok, err := h.store.Renew(rctx, markKey(id), []byte(markLive), h.timeout)
	if err != nil {
		h.upSince.Store(0)
		return
	}
	if h.upSince.Load() == 0 {
		h.upSince.Store(time.Now().UnixNano())
	}
	if ok {
		h.renewed.Store(start.UnixNano())
		if h.replica != "" && time.Since(h.named) > replicaTTL/24 {
			if h.store.Set(rctx, "replica/"+h.replica, []byte(id.String()), replicaTTL) == nil {
				h.named = time.Now()
			}
		}
		return
	}
	next := newHolderID()
	if err := h.store.Set(rctx, markKey(*next), []byte(markLive), h.timeout); err != nil {
		h.upSince.Store(0)
		return
	}
	h.mu.Lock()
	if len(h.past) < maxPast {
		h.past[id] = true
	}
	h.id.Store(next)
	h.renewed.Store(start.UnixNano())
	if h.replica != "" && h.store.Set(rctx, "replica/"+h.replica, []byte(next.String()), replicaTTL) == nil {
		h.named = time.Now()
	}
	close(h.changed)
	h.changed = make(chan struct{})
	for w := range h.watches {
		go w.f()
	}
	clear(h.watches)
	h.mu.Unlock()
	h.log.Warn("holder mark lapsed (the process was paused, or cut off from the store): a new incarnation holds its claims",
		"previous", id.String(), "holder", next.String())
}

// Dead reports whether the claims of incarnation id are free: its mark
// says so, or it is gone and this process has seen the store answer for a
// whole timeout.
func (h *Holder) Dead(ctx context.Context, id HolderID) (bool, error) {
	h.mu.Lock()
	mine := id == h.ID() || h.past[id]
	h.mu.Unlock()
	if mine {
		return false, nil
	}
	v, err := h.store.Get(ctx, markKey(id))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	switch string(v) {
	case markLive:
		return false, nil
	case markDead:
		return true, nil
	}
	up := h.upSince.Load()
	return up != 0 && time.Since(time.Unix(0, up)) >= h.timeout, nil
}
