package middleware

// A claim is one request's hold on its key in the dedupe window, from the
// moment it is made until the agent's answer is stored or the claim is
// released. The pending entry the store holds names the request (a random
// owner) and the process holding it (its incarnation, state.Holder), so that
//
//   - only the request holding a claim can renew, complete or release it
//     (each is a compare-and-set on the pending entry): a holder that lost
//     its claim cannot complete as if it still held it;
//   - a claim whose holder died is free at once for the next request with
//     its key (takeOver), instead of refusing it as in flight until the
//     lease lapses;
//   - a holder that may have been taken for dead (its liveness mark lapsed
//     while it was paused or cut off from the store) makes each of its
//     claims its own again before it delivers or goes on: where another
//     request took one over meanwhile, that compare-and-set fails, and the
//     paused holder delivers nothing.

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/state"
)

// ClaimHolder is this process as the holder of the window's claims
// (state.Holder).
type ClaimHolder interface {
	// ID is the incarnation new claims name.
	ID() state.HolderID
	// Changed is closed when the incarnation current now is replaced.
	Changed() <-chan struct{}
	// Dead reports whether the claims of incarnation id are free.
	Dead(ctx context.Context, id state.HolderID) (bool, error)
	// Fresh reports whether the liveness mark was written recently enough
	// that no other Baton can have found it gone; Confirm writes it now
	// unless it is fresh (beginning a new incarnation when it had lapsed),
	// and reports whether it is fresh after.
	Fresh() bool
	Confirm(ctx context.Context) bool
	// AfterChange runs f in a goroutine of its own when the incarnation
	// since (a Changed channel) belongs to is replaced, at once if it
	// already has been; stop unregisters f (dedupe_lease.go).
	AfterChange(since <-chan struct{}, f func()) (stop func() bool)
}

// errMarkNotRenewed: this process's liveness mark could not be renewed, so
// a claim it makes its own again may be taken over before long.
var errMarkNotRenewed = errors.New("dedupe: the holder's liveness mark could not be renewed")

// claim is one request's hold on its key.
type claim struct {
	skey    string
	changed <-chan struct{} // the holder's, when the claim was made; nil: no holder
	mu      sync.Mutex
	val     []byte // the pending entry the store holds for the request
}

// newClaim makes the pending entry of a request with fingerprint fp, named
// for the holder's current incarnation.
func (d *dedupe) newClaim(skey string, fp [32]byte) *claim {
	c := &claim{skey: skey}
	var holder state.HolderID
	if d.holder != nil {
		c.changed = d.holder.Changed()
		holder = d.holder.ID()
	}
	c.val = encodePending(fp, holder)
	return c
}

func (c *claim) value() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.val
}

// changedSince reports whether the holder's incarnation changed since the
// claim was made or last made its own.
func (c *claim) changedSince() bool {
	if c.changed == nil {
		return false
	}
	select {
	case <-c.changed:
		return true
	default:
		return false
	}
}

// own makes the claim the holder's current incarnation's, by a
// compare-and-set on its pending entry. It reports false when another
// request took the claim over.
func (d *dedupe) own(ctx context.Context, c *claim, lease time.Duration) (bool, error) {
	changed, holder := d.holder.Changed(), d.holder.ID()
	c.mu.Lock()
	defer c.mu.Unlock()
	next := withHolder(c.val, holder)
	ok, err := d.store.Swap(ctx, c.skey, c.val, next, lease)
	if err == nil && !ok {
		// An earlier swap may have been made though its reply was lost:
		// then the entry is next already.
		ok, err = d.store.Renew(ctx, c.skey, next, lease)
	}
	if err == nil && ok {
		c.val, c.changed = next, changed
	}
	return ok, err
}

// takeOver makes the claim c in place of cur, the pending entry of another
// request, when that request can no longer complete: its holder is dead,
// or it is this process's own claim whose release is kept for the store
// (dedupe_kept.go). It reports whether c now holds the key.
func (d *dedupe) takeOver(ctx context.Context, in *Info, c *claim, cur []byte, fp [32]byte, positional bool, lease time.Duration) (bool, error) {
	free := d.kept.abandoned(c.skey, cur)
	if !free && d.holder != nil {
		e, err := decodeEntry(cur)
		if err != nil || e.state != statePending || !e.hasHolder || (e.fp != fp && !positional) {
			return false, nil
		}
		if free, err = d.holder.Dead(ctx, e.holder); err != nil {
			return false, err
		}
		if free {
			d.log.LogAttrs(ctx, slog.LevelInfo, "dedupe claim of a dead holder taken over",
				slog.String("edge", in.Edge()), slog.String("trace_id", in.TraceID), slog.String("holder", e.holder.String()))
		}
	}
	if !free {
		return false, nil
	}
	ok, err := d.store.Swap(ctx, c.skey, cur, c.value(), lease)
	if ok {
		d.kept.takenOver(c.skey)
	}
	return ok, err
}

// mayBeTakenForDead reports whether another Baton may have taken this
// process for dead since claim c was made: its incarnation changed, or its
// mark was not written for a while (it was paused, or the store slow).
func (d *dedupe) mayBeTakenForDead(c *claim) bool {
	return d.holder != nil && (c.changedSince() || !d.holder.Fresh())
}

// deliver forwards a claimed request, keeping its lease meanwhile, and
// stores or releases the claim by the outcome.
func (d *dedupe) deliver(w http.ResponseWriter, r *http.Request, in *Info, pol *DedupePolicy, c *claim) {
	// The claim outlives the client: detach the upstream call from its
	// cancellation so the agent's answer is captured for the retry.
	ctx := Detached(r.Context(), in)
	if d.mayBeTakenForDead(c) {
		// Make sure of the claim before the agent sees anything: with a live
		// mark, then by a compare-and-set that fails where another request
		// took it over.
		ok, err := false, errMarkNotRenewed
		if d.holder.Confirm(ctx) {
			ok, err = d.own(ctx, c, pol.Lease)
		}
		if err == nil && !d.holder.Fresh() {
			err = errMarkNotRenewed
		}
		if err != nil {
			if !pol.FailOpen || in.Nonce != nil { // refused: released when the store answers
				d.kept.keep(c.skey, &keptWrite{pending: c.value(), edge: in.Edge()})
			}
			d.storeFailed(w, r, in, pol, err)
			return
		}
		if !ok {
			in.Dedupe = DedupeConflict
			w.Header().Set("Retry-After", "1")
			MarkRefused(w, problem.InFlight)
			refuse(w, r, problem.New(r, problem.InFlight,
				"this Baton was paused or cut off from its store and its claim on this Idempotency-Key may be lost; retry"))
			return
		}
	}
	lease := d.keepLease(ctx, c, pol.Lease, in)
	cw := &captureWriter{ResponseWriter: w, limit: pol.MaxResponseBytes}
	completed := false
	defer func() {
		lease.end()
		v := recover()
		d.settle(ctx, in, pol, c, cw, completed && v == nil)
		if v != nil {
			panic(v)
		}
	}()
	d.next.ServeHTTP(cw, r.WithContext(ctx))
	completed = !cw.hijacked
}

// settle stores a final response for the window, or releases the claim. A
// write the store does not take is kept in the process and made once it
// answers (dedupe_kept.go): the agent's answer is never lost to a store
// that was down when it came.
func (d *dedupe) settle(ctx context.Context, in *Info, pol *DedupePolicy, c *claim, cw *captureWriter, completed bool) {
	final := completed && cw.status >= 200 && (pol.ReplayErrors || (cw.status < 500 && !a2aFailure(in, cw)))
	pending := c.value()
	w := &keptWrite{pending: pending, edge: in.Edge()}
	var err error
	if final {
		w.final, w.ttl, w.until = encodeComplete(pending, cw), pol.Window, time.Now().Add(pol.Window)
		var stored bool
		stored, _, err = storeFinal(ctx, d.store, c.skey, pending, w.final, pol.Window)
		if err == nil && !stored {
			d.log.LogAttrs(ctx, slog.LevelWarn, "dedupe answer not stored: another request holds its key (this claim lapsed, or was taken over)",
				slog.String("edge", in.Edge()), slog.String("trace_id", in.TraceID))
		}
	} else {
		_, err = d.store.Release(ctx, c.skey, pending)
	}
	if err == nil {
		return
	}
	if d.kept.keep(c.skey, w) {
		d.log.LogAttrs(ctx, slog.LevelError, "dedupe window not updated yet: kept in this process, written when the store answers",
			slog.String("edge", in.Edge()), slog.String("trace_id", in.TraceID),
			slog.Bool("final", final), slog.String("error", err.Error()))
		return
	}
	d.log.LogAttrs(ctx, slog.LevelError, "dedupe window not updated, and no room to keep the write: a resend may run again",
		slog.String("edge", in.Edge()), slog.String("trace_id", in.TraceID),
		slog.Bool("final", final), slog.String("error", err.Error()))
}

// newOwner returns random bytes that make a pending claim unique to the
// request holding it.
func newOwner() [16]byte {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return b
}
