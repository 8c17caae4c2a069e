package middleware

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// leaseKeeper keeps one claim's lease while its request is delivered: it
// renews the lease every third of it, and makes the claim the holder's
// again when the holder's incarnation changes. Nearly every request ends
// long before either (a third of the 30s default lease), so nothing runs
// for it until one is due: a timer and a watch on the holder's incarnation,
// stopped when the request ends. The first of them to fire starts the
// renewals, in the goroutine the timer or the watch runs its function in,
// for the rest of the request.
type leaseKeeper struct {
	d     *dedupe
	ctx   context.Context
	c     *claim
	lease time.Duration
	in    *Info
	due   *time.Timer
	watch func() bool // stops the watch on the holder; nil: no holder

	mu    sync.Mutex
	ended bool
	stop  chan struct{} // made when renewals start; closed when the request ends
}

// keepLease starts keeping c's lease.
func (d *dedupe) keepLease(ctx context.Context, c *claim, lease time.Duration, in *Info) *leaseKeeper {
	k := &leaseKeeper{d: d, ctx: ctx, c: c, lease: lease, in: in}
	start := k.start
	k.due = time.AfterFunc(lease/3, start)
	if d.holder != nil && c.changed != nil {
		k.watch = d.holder.AfterChange(c.changed, start)
	}
	return k
}

// start runs the renewals until the request ends, unless they run already
// or it has ended. Whichever fired, the holder's change comes first: the
// renewals see it on the claim's Changed channel and own the claim, which
// renews its lease too; else a renewal is due now.
func (k *leaseKeeper) start() {
	k.mu.Lock()
	if k.ended || k.stop != nil {
		k.mu.Unlock()
		return
	}
	k.stop = make(chan struct{})
	k.mu.Unlock()
	k.d.renew(k.ctx, k.c, k.lease, k.in, k.stop, !k.c.changedSince())
}

// end stops the keeping: the request is over.
func (k *leaseKeeper) end() {
	k.due.Stop()
	if k.watch != nil {
		k.watch()
	}
	k.mu.Lock()
	k.ended = true
	stop := k.stop
	k.mu.Unlock()
	if stop != nil {
		close(stop)
	}
}

// renew keeps the lease alive every Lease/3 until stop is closed, and makes
// the claim the holder's again when its incarnation changes. due: the first
// renewal is due at once.
func (d *dedupe) renew(ctx context.Context, c *claim, lease time.Duration, in *Info, stop <-chan struct{}, due bool) {
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	changed := c.changed
	stale := false // the claim names an earlier incarnation: own it before renewing
	for {
		var ok bool
		var err error
		change := false
		if !due {
			select {
			case <-stop:
				return
			case <-t.C:
			case <-changed:
				change = true
			}
		}
		due = false
		switch {
		case change:
			changed = d.holder.Changed()
			ok, err = d.own(ctx, c, lease)
			stale = err != nil
		case stale:
			ok, err = d.own(ctx, c, lease)
			stale = err != nil
		default:
			ok, err = d.store.Renew(ctx, c.skey, c.value(), lease)
		}
		if err != nil || !ok {
			d.log.LogAttrs(ctx, slog.LevelWarn, "dedupe lease not renewed",
				slog.String("edge", in.Edge()), slog.String("trace_id", in.TraceID),
				slog.Bool("lost", !ok && err == nil), slog.Any("error", err))
		}
		if err == nil && !ok {
			return // another request holds the key: the answer's write is fenced
		}
	}
}
