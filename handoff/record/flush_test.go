package record_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// heldRelinks lets a Book's first round of links through and holds every
// later one (the relinks of links another writer's entries refused) until
// release is closed.
type heldRelinks struct {
	state.Store
	mu      sync.Mutex
	rounds  int
	release chan struct{}
}

func (h *heldRelinks) AppendChained(ctx context.Context, links []state.Link) ([]state.LinkResult, error) {
	h.mu.Lock()
	h.rounds++
	n := h.rounds
	h.mu.Unlock()
	if n > 1 {
		<-h.release
	}
	return h.Store.AppendChained(ctx, links)
}

// TestWriteReturnsOnceItsRecordIsIn: a Write whose record lands in the
// batch's first round returns then, while another record of the batch (an
// outcome queued by WriteLater, whose trace another Baton has written) is
// still being relinked: the handoff it is written for does not wait for
// other handoffs' races. The held record is stored once the relink goes on.
func TestWriteReturnsOnceItsRecordIsIn(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	s := redisStore(t, url, redistest.Prefix(t, url))
	other := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
	defer other.Close()
	ctx := context.Background()
	if err := other.Write(ctx, recordIn(traceNo(1), "x")); err != nil {
		t.Fatal(err)
	}
	held := &heldRelinks{Store: s, release: make(chan struct{})}
	b := record.NewBook(held, time.Hour, slog.New(slog.DiscardHandler))
	defer b.Close()
	record.SetLinger(b, time.Minute)        // the queued record waits for the Write: one batch
	b.WriteLater(recordIn(traceNo(1), "b")) // entry 1 is taken: it needs a relink
	done := make(chan error, 1)
	go func() { done <- b.Write(ctx, recordIn(traceNo(2), "b")) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		close(held.release)
		t.Fatal("Write waited for another record's relink")
	}
	close(held.release)
	b.Close()
	tr, err := b.Trace(ctx, traceNo(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Entries) != 2 || record.Verify(tr.Entries, tr.Tail) != nil {
		t.Errorf("the relinked trace: %d entries (want 2), verify %v", len(tr.Entries), record.Verify(tr.Entries, tr.Tail))
	}
}
