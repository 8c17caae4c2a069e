package state_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// holderTimeout is short so that the tests watch marks lapse; every wait
// below is several timeouts long, so a slow machine only makes them slower.
const holderTimeout = time.Second

// holderStores runs f on a real Redis and on the in-memory store.
func holderStores(t *testing.T, f func(t *testing.T, store state.Store)) {
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		url := redistest.Shared(t)
		f(t, newRedis(t, config.Redis{URL: url, Prefix: testPrefix(t, url)}))
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		m := state.NewMemoryEvery(config.Memory{}, 50*time.Millisecond)
		t.Cleanup(func() { _ = m.Close() })
		f(t, m)
	})
}

func newHolder(store state.Store) *state.Holder {
	return state.NewHolder(store, holderTimeout, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func dead(t *testing.T, h *state.Holder, id state.HolderID) bool {
	t.Helper()
	d, err := h.Dead(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// eventually waits up to ten timeouts for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * holderTimeout); !cond(); time.Sleep(holderTimeout / 10) {
		if time.Now().After(end) {
			t.Fatalf("not after %v: %s", 10*holderTimeout, what)
		}
	}
}

// TestHolderRestartFreesPredecessor: a process that starts again in the
// same replica declares its predecessor dead at once, before its mark lapses.
func TestHolderRestartFreesPredecessor(t *testing.T) {
	holderStores(t, func(t *testing.T, store state.Store) {
		ctx := context.Background()
		first := newHolder(store)
		first.Begin(ctx, "host/agent/:15002")
		other := newHolder(store)
		other.Begin(ctx, "host/agent/:25002")
		if dead(t, other, first.ID()) {
			t.Fatal("a live holder was taken for dead")
		}
		again := newHolder(store)
		again.Begin(ctx, "host/agent/:15002")
		if !dead(t, again, first.ID()) || !dead(t, other, first.ID()) {
			t.Fatal("the replica's previous process was not declared dead when it started again")
		}
		if dead(t, other, again.ID()) || dead(t, again, again.ID()) {
			t.Fatal("the new process was taken for dead")
		}
	})
}

// TestHolderLiveWhileRunning: Run keeps the mark for as long as it runs, and
// declares the holder dead when it stops.
func TestHolderLiveWhileRunning(t *testing.T) {
	holderStores(t, func(t *testing.T, store state.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		h := newHolder(store)
		h.Begin(ctx, "")
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		other := newHolder(store)
		other.Begin(context.Background(), "")
		id := h.ID()
		time.Sleep(4 * holderTimeout)
		if dead(t, other, id) || h.ID() != id {
			t.Fatal("a running holder lost its mark")
		}
		cancel()
		<-done
		if !dead(t, other, id) {
			t.Fatal("a holder that stopped was not declared dead")
		}
	})
}

// TestHolderSilentIsDead: a holder that stops renewing (it died) is dead
// once its mark lapsed, for a Baton that has seen the store answer for a
// whole timeout; one that has just started waits that long, since a store
// that was down lets live holders' marks lapse too.
func TestHolderSilentIsDead(t *testing.T) {
	holderStores(t, func(t *testing.T, store state.Store) {
		ctx := context.Background()
		gone := newHolder(store)
		gone.Begin(ctx, "")
		watcher := newHolder(store)
		watcher.Begin(ctx, "")
		if dead(t, watcher, gone.ID()) {
			t.Fatal("dead before its mark lapsed")
		}
		eventually(t, "a silent holder is dead", func() bool { return dead(t, watcher, gone.ID()) })

		late := newHolder(store)
		late.Begin(ctx, "")
		if dead(t, late, gone.ID()) {
			t.Fatal("a Baton that just saw the store answer took a lapsed mark for dead")
		}
		// Keep late's view of the store fresh, as Run does.
		for end := time.Now().Add(holderTimeout * 3 / 2); time.Now().Before(end); time.Sleep(holderTimeout / 5) {
			late.Confirm(ctx)
		}
		if !dead(t, late, gone.ID()) {
			t.Fatal("a lapsed mark is not dead after a whole timeout of the store answering")
		}
	})
}

// TestHolderLapseBeginsIncarnation: a holder whose own mark lapsed (it was
// paused) begins a new incarnation when it next renews; its claims learn it
// through Changed, and it still counts its earlier incarnation as its own.
func TestHolderLapseBeginsIncarnation(t *testing.T) {
	holderStores(t, func(t *testing.T, store state.Store) {
		ctx := context.Background()
		h := newHolder(store)
		h.Begin(ctx, "host/agent/:15002")
		old, changed := h.ID(), h.Changed()
		if !h.Fresh() {
			t.Fatal("a mark just written is not fresh")
		}
		told, untold := make(chan struct{}), make(chan struct{})
		stopTold := h.AfterChange(changed, func() { close(told) })
		stopUntold := h.AfterChange(changed, func() { close(untold) })
		if !stopUntold() {
			t.Fatal("stopping a watch before the change reports it was not registered")
		}
		watcher := newHolder(store)
		watcher.Begin(ctx, "")
		eventually(t, "the paused holder's mark lapses", func() bool {
			watcher.Confirm(ctx)
			return dead(t, watcher, old)
		})
		if h.Fresh() {
			t.Fatal("a lapsed mark is fresh")
		}
		h.Confirm(ctx)
		select {
		case <-changed:
		default:
			t.Fatal("Changed was not closed by a new incarnation")
		}
		select {
		case <-told:
		case <-time.After(10 * time.Second):
			t.Fatal("AfterChange's function did not run on the change")
		}
		if stopTold() {
			t.Fatal("stopping a watch that ran reports it stopped it")
		}
		select {
		case <-untold:
			t.Fatal("a stopped watch ran")
		default:
		}
		late := make(chan struct{})
		h.AfterChange(changed, func() { close(late) }) // the change is past: at once
		select {
		case <-late:
		case <-time.After(10 * time.Second):
			t.Fatal("AfterChange on a channel already closed did not run its function")
		}
		if h.ID() == old || !h.Fresh() {
			t.Fatal("no new incarnation after the mark lapsed")
		}
		if dead(t, h, old) {
			t.Fatal("a holder took its own earlier incarnation for dead")
		}
		if dead(t, watcher, h.ID()) {
			t.Fatal("the new incarnation is not live")
		}
		// A restart in the same replica now frees the new incarnation's claims.
		again := newHolder(store)
		again.Begin(ctx, "host/agent/:15002")
		if !dead(t, again, h.ID()) {
			t.Fatal("the replica's key does not name the current incarnation")
		}
	})
}
