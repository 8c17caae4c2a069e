package proxy

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/batonproxy/baton/config"
)

// breakerJitter is how far an open time strays, as a share, at random: the
// Batons that lost a peer together do not probe it together.
const breakerJitter = 0.2

// breaker is the circuit breaker of the edge to one peer. gobreaker counts
// the failures, opens, lets the half-open probes through and closes; breaker
// decides how long each opening lasts: open_for at first, doubled by each
// probe that fails, up to max_open_for, each time jittered by ±20%. A probe
// that succeeds closes the breaker, and its next opening lasts open_for
// again. So a peer that is soon back is cut off only briefly, and one that
// stays down is probed ever less often.
//
// gobreaker's own open time is the shortest that breaker may choose; for
// the rest of the time it chose, breaker refuses as gobreaker does, with
// gobreaker.ErrOpenState, and reports the state open.
//
// A peer that could not be reached (the try got no answer: no connection,
// or one closed before the answer; not a timeout) is watched while the
// breaker is open: it is pinged every reachEvery, and once it answers again
// the breaker lets the next try through at once, as a probe, whatever open
// time it chose; once per streak of failures, until the breaker closes. So a
// Baton that restarted, or a link that healed, is back in about a second,
// while a peer that answers with failures, is too slow, or answers the ping
// but not the handoff, is still probed ever less often.
type breaker struct {
	cb            *gobreaker.CircuitBreaker[*http.Response]
	openFor, most time.Duration
	born          time.Time    // until counts from here, on the monotonic clock
	until         atomic.Int64 // open until born+until; 0: not since it last closed
	failedProbes  int          // in a row since it last closed; under gobreaker's lock

	// reach pings the peer (nil: not watched); reached is told when it
	// answers again.
	reach       func(ctx context.Context) error
	reached     func()
	unreachable atomic.Bool   // the last try got no answer, and did not time out
	watching    atomic.Uint64 // the watch running; bumped to end it
	released    atomic.Bool   // a watch let a probe through early since the breaker last closed
}

// reachEvery is how often an unreachable peer is pinged while the breaker
// is open.
const reachEvery = 250 * time.Millisecond

// newBreaker returns the breaker of the edge to peer. changed is told of
// each change of state, with the time the breaker stays open when it opens;
// it runs under gobreaker's lock and must not call the breaker.
func newBreaker(peer string, bc config.Breaker, changed func(from, to gobreaker.State, open time.Duration)) *breaker {
	b := &breaker{openFor: bc.OpenFor.D(), most: bc.MaxOpenFor.D(), born: time.Now()}
	b.cb = gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:        peer,
		MaxRequests: uint32(bc.HalfOpenRequests),
		// The shortest open time breaker may choose: a try let past held
		// just before the breaker opened is refused by gobreaker still
		// (unless it stalls longer than that on the way). At least 1ns:
		// gobreaker takes 0 for 60s.
		Timeout:     max(openTime(b.openFor, b.most, 0, 0), time.Nanosecond),
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(bc.Failures) },
		// A try the caller abandoned says nothing about the peer.
		IsSuccessful: func(err error) bool { return err == nil || errors.Is(err, errCallerGone) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			changed(from, to, b.changed(from, to))
		},
	})
	return b
}

// Execute runs try unless the breaker is open; then it returns
// gobreaker.ErrOpenState (or, half-open with its probes out,
// gobreaker.ErrTooManyRequests).
func (b *breaker) Execute(try func() (*http.Response, error)) (*http.Response, error) {
	if b.held() {
		return nil, gobreaker.ErrOpenState
	}
	return b.cb.Execute(try)
}

// State is the breaker's state, open for all the time it chose.
func (b *breaker) State() gobreaker.State {
	if b.held() {
		return gobreaker.StateOpen
	}
	return b.cb.State()
}

// held reports whether the breaker is within the open time it chose.
// Closed, it costs one atomic load.
func (b *breaker) held() bool {
	u := b.until.Load()
	return u != 0 && int64(time.Since(b.born)) < u
}

// changed follows gobreaker's change of state from → to, and returns how
// long the breaker stays open when it opens.
func (b *breaker) changed(from, to gobreaker.State) time.Duration {
	switch to {
	case gobreaker.StateOpen:
		if from == gobreaker.StateHalfOpen {
			b.failedProbes++
		}
		d := openTime(b.openFor, b.most, b.failedProbes, rand.Float64())
		b.until.Store(int64(time.Since(b.born) + d))
		gen := b.watching.Add(1)
		// One early probe per streak: a peer that answers the ping but not
		// the handoff (it resets each one) is backed off as any other.
		if b.reach != nil && b.unreachable.Load() && !b.released.Load() {
			go b.watch(gen)
		}
		return d
	case gobreaker.StateClosed:
		b.failedProbes = 0
		b.until.Store(0)
		b.watching.Add(1)
		b.released.Store(false)
	}
	return 0
}

// tried notes how a try ended: whether the peer could not be reached.
func (b *breaker) tried(err error) {
	b.unreachable.Store(err != nil && !isTimeout(err) && !errors.Is(err, context.Canceled))
}

// watch pings the unreachable peer while the breaker holds open (and the
// watch is the current one); when the peer answers, the hold ends: the next
// try is the probe.
func (b *breaker) watch(gen uint64) {
	t := time.NewTicker(reachEvery)
	defer t.Stop()
	for range t.C {
		if b.watching.Load() != gen || !b.held() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*reachEvery)
		err := b.reach(ctx)
		cancel()
		if err == nil && b.watching.Load() == gen {
			b.released.Store(true)
			b.until.Store(0)
			if b.reached != nil {
				b.reached()
			}
			return
		}
	}
}

// openTime is how long the breaker stays open after failedProbes probes in
// a row failed: openFor doubled for each, up to most, times a factor from
// 1-breakerJitter to 1+breakerJitter that r, in [0, 1), picks; never more
// than most.
func openTime(openFor, most time.Duration, failedProbes int, r float64) time.Duration {
	d := openFor
	for i := 0; i < failedProbes && d < most; i++ {
		if d > most/2 {
			d = most
		} else {
			d *= 2
		}
	}
	f := float64(d) * (1 - breakerJitter + 2*breakerJitter*r)
	if f >= float64(most) {
		return most
	}
	return time.Duration(f)
}
