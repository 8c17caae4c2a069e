package compensation

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
)

// rig is compensators of several agents on one in-memory store and book,
// whose egress chains take each compensation (answering 200) and note it.
type rig struct {
	t     *testing.T
	store *state.Memory
	book  *record.Book
	mu    sync.Mutex
	sent  []string // "agent path", in the order the egress chains took them
}

func newRig(t *testing.T) *rig {
	store := state.NewMemory(config.Memory{})
	t.Cleanup(func() { store.Close() })
	book := record.NewBook(store, time.Hour, slog.New(slog.DiscardHandler))
	t.Cleanup(book.Close)
	return &rig{t: t, store: store, book: book}
}

// start runs the compensator of the agent yaml configures.
func (g *rig) start(yaml string) *Compensator {
	t := g.t
	cfg, err := config.Parse(strings.NewReader(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	egress := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.sent = append(g.sent, cfg.Agent+" "+r.URL.Path)
		g.mu.Unlock()
		io.WriteString(w, `{"undone":true}`)
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	cr, err := New(Options{Config: cfg, Store: g.store, Book: g.book, Log: slog.New(slog.DiscardHandler),
		Background: func(fn func(context.Context)) { wg.Go(func() { fn(ctx) }) },
		Egress:     func() http.Handler { return egress }})
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

// write writes an egress record of trace from → to, created at.
func (g *rig) write(trace, from, to string, st record.State, effects []string, at time.Time) {
	g.t.Helper()
	r := &record.Record{ID: record.NewID(trace), TraceID: trace, Side: record.Egress, From: from, To: to,
		Key: "k-" + from + to, State: st, Effects: effects, Created: at, Updated: at}
	if err := g.book.Write(g.t.Context(), r); err != nil {
		g.t.Fatal(err)
	}
}

// settle waits until cr reads the trace's abandonment as settled.
func (g *rig) settle(cr *Compensator, trace string) *Abandonment {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ab, err := cr.Abandonment(g.t.Context(), trace)
		if err != nil {
			g.t.Fatal(err)
		}
		if ab.Settled {
			return ab
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("not settled after 10s: %+v", ab)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (g *rig) compensations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.sent...)
}

// bookingAgent is a's configuration: its handoffs to b book, and a booking
// is undone with POST /cancel.
const bookingAgent = "agent: a\nupstream: http://127.0.0.1:1\npeers: {b: {url: http://127.0.0.1:2}}\n" +
	"edges: [{to: b, side_effects: [{name: booking, compensate: {path: /cancel}}]}]\n"

// TestAbandonWaitsForLateRecords: a trace is abandoned while its latest
// handoff's record (b → c, which charged a card) is not written yet, as
// when a script gives up the moment a chain fails and the records are
// still on their way from the Batons' flushers. a's Baton, which holds the
// earlier booking, must not cancel it before b's Baton has refunded the
// charge that turns up a moment later: the latest is undone first.
func TestAbandonWaitsForLateRecords(t *testing.T) {
	g := newRig(t)
	a := g.start(bookingAgent)
	g.start("agent: b\nupstream: http://127.0.0.1:1\npeers: {c: {url: http://127.0.0.1:3}}\n" +
		"edges: [{to: c, side_effects: [{name: charge, compensate: {path: /refund}}]}]\n")

	const trace = "c0ffee00c0ffee00c0ffee00c0ffee00"
	t0 := time.Now().Add(-time.Second)
	g.write(trace, "a", "b", record.Delivered, []string{"booking"}, t0)
	g.write(trace, "c", "d", record.Dead, nil, t0.Add(20*time.Millisecond))
	if _, err := a.Abandon(t.Context(), trace, "the trip was cancelled", "test"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the charge's record lands after the abandon
	g.write(trace, "b", "c", record.Delivered, []string{"charge"}, t0.Add(10*time.Millisecond))

	ab := g.settle(a, trace)
	if len(ab.Steps) != 2 || ab.Steps[0].Effect != "charge" || ab.Steps[1].Effect != "booking" {
		t.Fatalf("steps %+v; want the charge, then the booking", ab.Steps)
	}
	if sent := g.compensations(); len(sent) != 2 || sent[0] != "b /refund" || sent[1] != "a /cancel" {
		t.Fatalf("compensations sent %q; want b's refund, then a's cancellation", sent)
	}
}

// TestAbandonWithoutItsMark: a store that lost the abandon's mark (its
// retention ran out while a step waited on a person, or a Redis under an
// eviction policy dropped it) still sees the pending trace's steps run,
// once, and the trace leave the pending list.
func TestAbandonWithoutItsMark(t *testing.T) {
	g := newRig(t)
	a := g.start(bookingAgent)
	const trace = "0dd0dd000dd0dd000dd0dd000dd0dd00"
	t0 := time.Now().Add(-time.Second)
	g.write(trace, "a", "b", record.Delivered, []string{"booking"}, t0)
	g.write(trace, "b", "c", record.Dead, nil, t0.Add(10*time.Millisecond))
	if _, err := a.Abandon(t.Context(), trace, "the trip was cancelled", "test"); err != nil {
		t.Fatal(err)
	}
	if err := g.store.Delete(t.Context(), abandonKey(trace)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pending, err := g.store.IndexRange(t.Context(), abandonPending, math.Inf(-1), math.Inf(1), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trace is still pending after 10s; compensations sent %q", g.compensations())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sent := g.compensations(); len(sent) != 1 || sent[0] != "a /cancel" {
		t.Fatalf("compensations sent %q; want a's cancellation, once", sent)
	}
}
