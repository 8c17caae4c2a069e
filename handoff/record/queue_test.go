package record_test

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
)

// gatedStore holds every AppendChained until open is closed, and counts
// the links it stores.
type gatedStore struct {
	state.Store
	open  chan struct{}
	mu    sync.Mutex
	links int
}

func (g *gatedStore) AppendChained(ctx context.Context, links []state.Link) ([]state.LinkResult, error) {
	<-g.open
	res, err := g.Store.AppendChained(ctx, links)
	g.mu.Lock()
	for _, r := range res {
		if r.OK {
			g.links++
		}
	}
	g.mu.Unlock()
	return res, err
}

func (g *gatedStore) stored() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.links
}

// A writer that finds the queue full waits for room, and nothing it queued
// is lost: while the store holds the flusher, the queue fills to its bound
// and stays there; once the store answers, every record is stored.
func TestBookFullQueueWaits(t *testing.T) {
	t.Parallel()
	mem := state.NewMemory(config.Memory{})
	defer mem.Close()
	s := &gatedStore{Store: mem, open: make(chan struct{})}
	b := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
	const n = record.QueueSize + 300
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := range n {
			b.WriteLater(recordIn(traceNo(i), "a"))
		}
	}()
	for deadline := time.Now().Add(20 * time.Second); record.Queued(b) < record.QueueSize; {
		if time.Now().After(deadline) {
			close(s.open)
			t.Fatalf("the queue never filled: %d queued", record.Queued(b))
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a writer that did not wait would have queued more by now
	select {
	case <-wrote:
		t.Error("the writer was not held by a full queue")
	default:
	}
	if q := record.Queued(b); q != record.QueueSize {
		t.Errorf("%d records queued, want the bound %d", q, record.QueueSize)
	}
	close(s.open)
	<-wrote
	b.Close()
	if got := s.stored(); got != n {
		t.Errorf("%d records stored, want %d", got, n)
	}
}

// A Book makes no room for records before they come: a Record is over 600
// bytes, and a queue made for thousands of them at the start cost every
// Baton megabytes of heap, which the collector scanned on every cycle.
func TestNewBookHoldsNoQueue(t *testing.T) {
	mem := state.NewMemory(config.Memory{})
	defer mem.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := record.NewBook(mem, time.Hour, slog.New(slog.DiscardHandler))
	runtime.ReadMemStats(&after)
	b.Close()
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<10 {
		t.Errorf("NewBook allocated %d KiB, want under 256", grew>>10)
	}
}

// Records queued and flushed in bursts: what a Book took is all stored, in
// order per trace, whatever the burst (record.Verify checks each chain).
func TestBookBursts(t *testing.T) {
	t.Parallel()
	mem := state.NewMemory(config.Memory{})
	defer mem.Close()
	b := record.NewBook(&countingStore{Store: mem}, time.Hour, slog.New(slog.DiscardHandler)) // not in-process: every write goes through the flusher
	ctx := context.Background()
	for burst, size := range []int{1, 700, 3, 2000} {
		for i := range size {
			b.WriteLater(recordIn(traceNo(i%7), "a"))
		}
		if err := b.Write(ctx, recordIn(traceNo(burst), "w")); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	total := 0
	for i := range 7 {
		tr, err := b.Trace(ctx, traceNo(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := record.Verify(tr.Entries, tr.Tail); err != nil {
			t.Errorf("trace %d: %v", i, err)
		}
		total += len(tr.Entries)
	}
	if want := 1 + 700 + 3 + 2000 + 4; total != want {
		t.Errorf("%d records stored, want %d", total, want)
	}
}
