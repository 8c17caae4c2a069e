package middleware

import (
	"context"
	"sync"

	"github.com/batonproxy/baton/state"
)

// A Ride lets counts (a state.Counts) that one layer of an outbound call
// must write share the store round trip of another layer's write for the
// same call: a model call's spend, added to its chain's count, rides on the
// journal's append of the call's answer. Both are written when the answer's
// last byte has been read, before the agent sees it.
//
// The layer that owns the counts makes the Ride (WithRide), Puts them when
// the answer has ended and, once it has passed the end on, Closes it: if
// another layer took the counts and wrote them, Close says how that went;
// if not, the owner writes them alone. Counts Put after Close are dropped,
// and taken only once, so that they are never written twice.
type Ride struct {
	mu     sync.Mutex
	counts state.Counts
	put    bool
	taken  bool
	closed bool
	err    error // the taker's write's
}

type rideKey struct{}

// WithRide returns ctx carrying a new Ride.
func WithRide(ctx context.Context) (context.Context, *Ride) {
	r := &Ride{}
	return context.WithValue(ctx, rideKey{}, r), r
}

// RideFrom returns the Ride ctx carries, or nil.
func RideFrom(ctx context.Context) *Ride {
	r, _ := ctx.Value(rideKey{}).(*Ride)
	return r
}

// Put offers counts to the next write of the call. Counts already put, or
// a Ride closed, keep them out: the owner's Close then says whether a write
// took any.
func (r *Ride) Put(c state.Counts) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed && !r.put {
		r.counts, r.put = c, true
	}
}

// Take hands the counts to a write that carries them, which then reports
// its outcome with Taken. ok is false when there are none to take.
func (r *Ride) Take() (c state.Counts, ok bool) {
	if r == nil {
		return state.Counts{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.put || r.taken || r.closed {
		return state.Counts{}, false
	}
	r.taken = true
	return r.counts, true
}

// Taken reports the outcome of the write that took the counts. A failed
// write's counts are not given back: its outcome is unknown, and writing
// them again could count them twice.
func (r *Ride) Taken(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// Close ends the Ride and reports whether a write took its counts, with
// the error that write reported. When none did, the owner writes its
// counts alone.
func (r *Ride) Close() (taken bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return r.taken, r.err
}
