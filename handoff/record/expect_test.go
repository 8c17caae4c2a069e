package record_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// linkCounter counts what a Book asks of the store: the reads of chain
// tails, the rounds of links and the links refused because another writer
// had taken their number.
type linkCounter struct {
	state.Store
	mu                     sync.Mutex
	tails, rounds, refused int
}

func (c *linkCounter) ChainTails(ctx context.Context, logs []string) ([]string, error) {
	c.mu.Lock()
	c.tails += len(logs)
	c.mu.Unlock()
	return c.Store.ChainTails(ctx, logs)
}

func (c *linkCounter) AppendChained(ctx context.Context, links []state.Link) ([]state.LinkResult, error) {
	res, err := c.Store.AppendChained(ctx, links)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rounds++
	for _, r := range res {
		if !r.OK && r.Err == nil {
			c.refused++
		}
	}
	return res, err
}

func (c *linkCounter) counts() (tails, rounds, refused int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tails, c.rounds, c.refused
}

func redisStore(t *testing.T, url, prefix string) state.Store {
	t.Helper()
	s, err := state.NewRedis(config.Redis{URL: url, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openBook returns a Book on s, closed by the test's cleanup (before s).
func openBook(t *testing.T, s state.Store) *record.Book {
	b := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
	t.Cleanup(b.Close)
	return b
}

// countedBooks returns two Books on one prefix of the shared Redis: a, a
// peer's Baton's, and b, whose use of the store c counts.
func countedBooks(t *testing.T) (a, b *record.Book, c *linkCounter) {
	url := redistest.Shared(t)
	s := redisStore(t, url, redistest.Prefix(t, url))
	c = &linkCounter{Store: s}
	return openBook(t, s), openBook(t, c), c
}

// recordIn is a new egress record in trace tr, from agent from.
func recordIn(tr, from string) *record.Record {
	r := newRecord("c")
	r.ID, r.TraceID, r.From = record.NewID(tr), tr, from
	return r
}

func traceNo(i int) string { return fmt.Sprintf("%032x", 0xabc000+i) }

// handOn writes a's record of a handoff in trace tr (as agent a's Baton
// does before sending it), then b's record of the handoff its agent makes in
// turn, marked as following a (as agent r's Baton does).
func handOn(t *testing.T, a, b *record.Book, tr string) {
	t.Helper()
	if err := a.Write(context.Background(), recordIn(tr, "a")); err != nil {
		t.Fatal(err)
	}
	rec := recordIn(tr, "r")
	rec.FollowsPeer("a")
	if err := b.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// TestFollowsPeerReadsTheTailFirst: two Books on one Redis stand for a
// peer's Baton (a) and the Baton whose agent hands on what a sent (r). r's
// record of its own handoff, marked as following a, links after a's entry
// at the first try, the tail read before; unmarked, it takes a refused link
// and a second round to get there. Each chain verifies.
func TestFollowsPeerReadsTheTailFirst(t *testing.T) {
	t.Parallel()
	a, b, r := countedBooks(t)
	ctx := context.Background()
	const n = 5
	for i := range n {
		handOn(t, a, b, traceNo(i))
	}
	if tails, rounds, refused := r.counts(); tails != n || rounds != n || refused != 0 {
		t.Errorf("following a peer: %d tails read, %d rounds, %d links refused; want %d, %d, 0", tails, rounds, refused, n, n)
	}
	// The same without the mark: the link is refused, and relinked.
	if err := a.Write(ctx, recordIn(traceNo(n), "a")); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(ctx, recordIn(traceNo(n), "r")); err != nil {
		t.Fatal(err)
	}
	if tails, rounds, refused := r.counts(); tails != n || rounds != n+2 || refused != 1 {
		t.Errorf("unmarked: %d tails read, %d rounds, %d links refused in all; want %d, %d, 1", tails, rounds, refused, n, n+2)
	}
	for i := range n + 1 {
		tr, err := b.Trace(ctx, traceNo(i))
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Entries) != 2 {
			t.Errorf("trace %d: %d entries, want 2", i, len(tr.Entries))
		}
		if err := record.Verify(tr.Entries, tr.Tail); err != nil {
			t.Errorf("trace %d: %v", i, err)
		}
	}
}

// TestFollowsPeerInAnotherStore: when the peer's traces are not in this
// Book's store (another prefix here), a read finds nothing and the record
// links as the trace's first entry; the peer's next writes are not read
// for, but one in reprobeEvery (32) is, so that a change of deployment is
// seen. Another peer is read for at once.
func TestFollowsPeerInAnotherStore(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	prefix := redistest.Prefix(t, url)
	peer := openBook(t, redisStore(t, url, prefix+"peer:"))
	r := &linkCounter{Store: redisStore(t, url, prefix+"own:")}
	b := openBook(t, r)
	ctx := context.Background()
	const n = 40
	for i := range n {
		handOn(t, peer, b, traceNo(i))
	}
	if tails, rounds, refused := r.counts(); tails != 2 || rounds != n || refused != 0 {
		t.Errorf("%d tails read, %d rounds, %d links refused for %d records; want 2 (the 1st and the 33rd), %d, 0", tails, rounds, refused, n, n)
	}
	rec := recordIn(traceNo(n), "r")
	rec.FollowsPeer("x")
	if err := b.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if tails, _, _ := r.counts(); tails != 3 {
		t.Errorf("another peer: %d tails read in all, want 3", tails)
	}
	tr, err := b.Trace(ctx, traceNo(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Entries) != 1 || record.Verify(tr.Entries, tr.Tail) != nil {
		t.Errorf("the first trace in this store: %d entries (want 1), verify %v", len(tr.Entries), record.Verify(tr.Entries, tr.Tail))
	}
}
