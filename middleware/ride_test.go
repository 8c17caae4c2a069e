package middleware

import (
	"context"
	"errors"
	"testing"

	"github.com/batonproxy/baton/state"
)

// TestRide: counts are taken once, by one write; the owner learns whether
// they were, and with what outcome; counts put after the owner closed the
// ride are dropped, so that they are never written twice.
func TestRide(t *testing.T) {
	c := state.Counts{Key: "k", Deltas: []state.Scored{{Member: "calls", Score: 1}}}
	ctx, r := WithRide(context.Background())
	if RideFrom(ctx) != r || RideFrom(context.Background()) != nil {
		t.Fatal("RideFrom does not find the ride")
	}
	if _, ok := r.Take(); ok {
		t.Fatal("took counts nobody put")
	}
	r.Put(c)
	r.Put(state.Counts{Key: "second"})
	got, ok := r.Take()
	if !ok || got.Key != "k" {
		t.Fatalf("Take = %+v, %v", got, ok)
	}
	if _, again := r.Take(); again {
		t.Fatal("counts taken twice")
	}
	failed := errors.New("store down")
	r.Taken(failed)
	if taken, err := r.Close(); !taken || err != failed {
		t.Fatalf("Close = %v, %v; want taken, with the write's error", taken, err)
	}

	// Nobody takes them: the owner writes them alone.
	_, r = WithRide(context.Background())
	r.Put(c)
	if taken, err := r.Close(); taken || err != nil {
		t.Fatalf("Close of counts nobody took = %v, %v", taken, err)
	}
	// Closed: a late Put is dropped, and nothing can be taken.
	_, r = WithRide(context.Background())
	r.Close()
	r.Put(c)
	if _, ok := r.Take(); ok {
		t.Fatal("took counts after Close")
	}
	// No ride in the context: nothing to put or take.
	var none *Ride
	none.Put(c)
	if _, ok := none.Take(); ok {
		t.Fatal("took from no ride")
	}
}
