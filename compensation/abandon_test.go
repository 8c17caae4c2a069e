package compensation

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
)

// TestAbandonWaitsForLateRecords: a trace is abandoned while its latest
// handoff's record (b → c, which charged a card) is not written yet, as
// when a script gives up the moment a chain fails and the records are
// still on their way from the Batons' flushers. a's Baton, which holds the
// earlier booking, must not cancel it before b's Baton has refunded the
// charge that turns up a moment later: the latest is undone first.
func TestAbandonWaitsForLateRecords(t *testing.T) {
	store := state.NewMemory(config.Memory{})
	t.Cleanup(func() { store.Close() })
	book := record.NewBook(store, time.Hour, slog.New(slog.DiscardHandler))
	t.Cleanup(book.Close)

	var mu sync.Mutex
	var sent []string // the compensations, in the order the egress chains took them
	start := func(yaml string) *Compensator {
		cfg, err := config.Parse(strings.NewReader(yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		egress := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			sent = append(sent, cfg.Agent+" "+r.URL.Path)
			mu.Unlock()
			io.WriteString(w, `{"undone":true}`)
		})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		t.Cleanup(func() { cancel(); wg.Wait() })
		cr, err := New(Options{Config: cfg, Store: store, Book: book, Log: slog.New(slog.DiscardHandler),
			Background: func(fn func(context.Context)) { wg.Go(func() { fn(ctx) }) },
			Egress:     func() http.Handler { return egress }})
		if err != nil {
			t.Fatal(err)
		}
		return cr
	}
	a := start("agent: a\nupstream: http://127.0.0.1:1\npeers: {b: {url: http://127.0.0.1:2}}\n" +
		"edges: [{to: b, side_effects: [{name: booking, compensate: {path: /cancel}}]}]\n")
	start("agent: b\nupstream: http://127.0.0.1:1\npeers: {c: {url: http://127.0.0.1:3}}\n" +
		"edges: [{to: c, side_effects: [{name: charge, compensate: {path: /refund}}]}]\n")

	const trace = "c0ffee00c0ffee00c0ffee00c0ffee00"
	ctx := t.Context()
	t0 := time.Now().Add(-time.Second)
	rec := func(from, to, state string, effects []string, at time.Duration) *record.Record {
		return &record.Record{ID: record.NewID(trace), TraceID: trace, Side: record.Egress, From: from, To: to,
			Key: "k-" + from + to, State: record.State(state), Effects: effects, Created: t0.Add(at), Updated: t0.Add(at)}
	}
	booking := rec("a", "b", string(record.Delivered), []string{"booking"}, 0)
	dead := rec("c", "d", string(record.Dead), nil, 20*time.Millisecond)
	if err := book.Write(ctx, booking, dead); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Abandon(ctx, trace, "the trip was cancelled", "test"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the charge's record lands after the abandon
	if err := book.Write(ctx, rec("b", "c", string(record.Delivered), []string{"charge"}, 10*time.Millisecond)); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		ab, err := a.Abandonment(ctx, trace)
		if err != nil {
			t.Fatal(err)
		}
		if ab.Settled {
			if len(ab.Steps) != 2 || ab.Steps[0].Effect != "charge" || ab.Steps[1].Effect != "booking" {
				t.Fatalf("steps %+v; want the charge, then the booking", ab.Steps)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled after 10s: %+v", ab)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 2 || sent[0] != "b /refund" || sent[1] != "a /cancel" {
		t.Fatalf("compensations sent %q; want b's refund, then a's cancellation", sent)
	}
}
