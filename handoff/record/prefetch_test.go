package record_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state/redistest"
)

// waitTails waits until c has read n tails.
func waitTails(t *testing.T, c *linkCounter, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if tails, _, _ := c.counts(); tails >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the prefetch read no tail")
		}
	}
}

// TestPrefetchSparesTheRead: r's Book is told when a peer's handoff arrives
// (Prefetch) and reads the trace's tail then, while the handoff goes on to
// r's agent; the record of the handoff r's agent makes in turn is linked at
// the first try with no read left to make on its way. The receipt of the
// peer's handoff does not take the prefetched tail (the sender's outcome
// lands about when the receipt is written): it reads, or follows what its
// own Book linked. Each chain verifies.
func TestPrefetchSparesTheRead(t *testing.T) {
	t.Parallel()
	a, b, r := countedBooks(t)
	ctx := context.Background()
	const n = 5
	for i := range n {
		tr := traceNo(100 + i)
		if err := a.Write(ctx, recordIn(tr, "a")); err != nil {
			t.Fatal(err)
		}
		b.Prefetch(tr)
		waitTails(t, r, i+1)
		rec := recordIn(tr, "r")
		rec.FollowsPeer("a")
		if err := b.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if tails, rounds, refused := r.counts(); tails != i+1 || rounds != i+1 || refused != 0 {
			t.Fatalf("record %d: %d tails read, %d rounds, %d links refused; want %d, %d, 0 (the read made before the write)",
				i, tails, rounds, refused, i+1, i+1)
		}
	}
	// A prefetch nobody takes is dropped when the handling's receipt is
	// written; the receipt links after the Book's own record.
	tr := traceNo(100)
	rec := recordIn(tr, "a")
	rec.Side = record.Ingress
	rec.FollowsPeer("a")
	if err := b.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if tails, rounds, refused := r.counts(); tails != n || rounds != n+1 || refused != 0 {
		t.Errorf("the receipt: %d tails read, %d rounds, %d refused in all; want %d, %d, 0", tails, rounds, refused, n, n+1)
	}
	for i := range n {
		got, err := b.Trace(ctx, traceNo(100+i))
		if err != nil {
			t.Fatal(err)
		}
		if err := record.Verify(got.Entries, got.Tail); err != nil {
			t.Errorf("trace %d: %v", i, err)
		}
	}
}

// TestPrefetchOfNothing: a prefetch of a trace the store does not hold (the
// peer writes to another store) counts as a read that found nothing, and
// the record is linked as the trace's first entry without another read.
func TestPrefetchOfNothing(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	r := &linkCounter{Store: redisStore(t, url, redistest.Prefix(t, url))}
	b := openBook(t, r)
	tr := traceNo(200)
	b.Prefetch(tr)
	waitTails(t, r, 1)
	rec := recordIn(tr, "r")
	rec.FollowsPeer("elsewhere")
	if err := b.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if tails, rounds, refused := r.counts(); tails != 1 || rounds != 1 || refused != 0 {
		t.Errorf("%d tails read, %d rounds, %d refused; want 1, 1, 0", tails, rounds, refused)
	}
}
