package record_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

func stores(t *testing.T, run func(t *testing.T, s state.Store)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		s := state.NewMemory(config.Memory{})
		t.Cleanup(func() { s.Close() })
		run(t, s)
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		url := redistest.Shared(t)
		s, err := state.NewRedis(config.Redis{URL: url, Prefix: redistest.Prefix(t, url)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		run(t, s)
	})
}

const trace = "4bf92f3577b34da6a3ce929d0e0e4736"

func newRecord(to string) *record.Record {
	now := time.Now()
	return &record.Record{ID: record.NewID(trace), TraceID: trace, Side: record.Egress, From: "a", To: to, Hop: 1,
		Method: "POST", Target: "/x", State: record.Sent, Created: now, Updated: now, Replayable: true,
		Request: &record.Request{Method: "POST", URL: "http://b/x", Body: []byte(`{"x":1}`), BodyBytes: 7}}
}

func TestBookChainAndVerify(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s state.Store) {
		ctx := context.Background()
		b := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
		defer b.Close()
		r1, r2 := newRecord("b"), newRecord("c")
		if err := b.Write(ctx, r1, r2); err != nil {
			t.Fatal(err)
		}
		r1.State, r1.Status = record.Delivered, 201
		b.WriteLater(r1)
		r2.State = record.Dead
		if err := b.DeadLetter(ctx, r2); err != nil {
			t.Fatal(err)
		}
		b.Close() // flush
		tr, err := b.Trace(ctx, trace)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Entries) != 4 || len(tr.Records) != 2 {
			t.Fatalf("%d entries, %d records", len(tr.Entries), len(tr.Records))
		}
		if err := record.Verify(tr.Entries, tr.Tail); err != nil {
			t.Fatalf("intact chain: %v", err)
		}
		got, err := b.Get(ctx, r1.ID)
		if err != nil || got.State != record.Delivered || string(got.Request.Body) != `{"x":1}` {
			t.Fatalf("Get: %+v %v", got, err)
		}
		for _, list := range []record.DeadLetterList{record.EdgeDeadLetters("a→c"), record.AgentDeadLetters("a")} {
			dl, total, err := b.DeadLetters(ctx, list, 0, 10)
			if err != nil || total != 1 || len(dl) != 1 || dl[0].ID != r2.ID {
				t.Fatalf("dead letters of %v: %v %d %v", list, dl, total, err)
			}
		}
		for _, list := range []record.DeadLetterList{record.EdgeDeadLetters("a→b"), record.AgentDeadLetters("c")} {
			if n, err := b.DeadLetterCount(ctx, list); err != nil || n != 0 {
				t.Fatalf("dead letters of %v: %d %v, want none", list, n, err)
			}
		}
		if err := b.Undead(ctx, r2); err != nil {
			t.Fatal(err)
		}
		if n, err := b.DeadLetterCount(ctx, record.AgentDeadLetters("a")); err != nil || n != 0 {
			t.Fatalf("after Undead: %d %v", n, err)
		}
		if _, err := b.Get(ctx, trace+".0000000000000000"); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("unknown id: %v", err)
		}
	})
}

func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	s := state.NewMemory(config.Memory{})
	defer s.Close()
	b := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
	for i := 0; i < 4; i++ {
		if err := b.Write(context.Background(), newRecord("b")); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	tr, _ := b.Trace(context.Background(), trace)
	clone := func() [][]byte {
		out := make([][]byte, len(tr.Entries))
		copy(out, tr.Entries)
		return out
	}
	tests := []struct {
		name    string
		entries [][]byte
		tail    string
		want    string
	}{
		{"edited entry", func() [][]byte {
			e := clone()
			e[1] = []byte(strings.Replace(string(e[1]), `"to":"b"`, `"to":"x"`, 1))
			return e
		}(), tr.Tail, "does not follow entry 2"},
		{"deleted middle entry", append(clone()[:1], clone()[2:]...), tr.Tail, "entries are missing"},
		{"deleted last entry", clone()[:3], tr.Tail, "its tail is"},
		{"edited last entry", func() [][]byte {
			e := clone()
			var en record.Entry
			json.Unmarshal(e[3], &en)
			en.Record.Status = 200
			e[3], _ = json.Marshal(en)
			return e
		}(), tr.Tail, "its tail is"},
		{"everything deleted", nil, tr.Tail, "chain is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := record.Verify(tc.entries, tc.tail)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Verify = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestConcurrentWritersOneTrace(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s state.Store) {
		// Two Books on one store stand for two Batons (or replicas) sharing
		// Redis and writing the same trace.
		b1 := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
		b2 := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
		var wg sync.WaitGroup
		for _, b := range []*record.Book{b1, b2} {
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < 10; j++ {
						if err := b.Write(context.Background(), newRecord("b")); err != nil {
							t.Error(err)
						}
					}
				}()
			}
		}
		wg.Wait()
		b1.Close()
		b2.Close()
		tr, err := b1.Trace(context.Background(), trace)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Entries) != 80 {
			t.Errorf("%d entries, want 80", len(tr.Entries))
		}
		if err := record.Verify(tr.Entries, tr.Tail); err != nil {
			t.Errorf("concurrent writers broke the chain: %v", err)
		}
	})
}

// Edits made in Redis itself, behind Baton's back, show in Verify: an entry
// changed, and the last entry deleted (its tail stays in the chain's hash).
func TestVerifyDetectsTamperingInRedis(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	s, err := state.NewRedis(config.Redis{URL: url, Prefix: redistest.Prefix(t, url)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	b := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
	for i := 0; i < 3; i++ {
		if err := b.Write(ctx, newRecord("b")); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	verify := func() error {
		t.Helper()
		tr, err := b.Trace(ctx, trace)
		if err != nil {
			t.Fatal(err)
		}
		return record.Verify(tr.Entries, tr.Tail)
	}
	if err := verify(); err != nil {
		t.Fatalf("intact chain: %v", err)
	}
	key := s.Key("{" + trace + "}:records")
	rdb := s.Client()
	e2, err := rdb.HGet(ctx, key, "e:2").Result()
	if err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, key, "e:2", strings.Replace(e2, `"to":"b"`, `"to":"x"`, 1))
	if err := verify(); err == nil || !strings.Contains(err.Error(), "does not follow entry 2") {
		t.Errorf("edited entry: Verify = %v", err)
	}
	rdb.HSet(ctx, key, "e:2", e2)
	rdb.HDel(ctx, key, "e:3")
	if err := verify(); err == nil || !strings.Contains(err.Error(), "ends at entry 2 but entry 3 was written") {
		t.Errorf("deleted last entry: Verify = %v", err)
	}
}

// countingStore counts AppendChained calls (round trips) and the links in
// them.
type countingStore struct {
	state.Store
	mu           sync.Mutex
	calls, links int
}

func (c *countingStore) AppendChained(ctx context.Context, links []state.Link) ([]state.LinkResult, error) {
	c.mu.Lock()
	c.calls++
	c.links += len(links)
	c.mu.Unlock()
	return c.Store.AppendChained(ctx, links)
}

func (c *countingStore) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.links
}

// Records nobody waits on linger to share a round trip; a record a writer
// waits on takes them along at once, and Close flushes them.
func TestBookBatchesWhatNobodyWaitsOn(t *testing.T) {
	t.Parallel()
	mem := state.NewMemory(config.Memory{})
	defer mem.Close()
	s := &countingStore{Store: mem}
	b := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
	record.SetLinger(b, time.Hour) // longer than the test's deadline: only a waiting writer or Close flushes
	for range 20 {
		b.WriteLater(newRecord("b"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Write(ctx, newRecord("c")); err != nil {
		t.Fatalf("a waiting writer was held by the linger: %v", err)
	}
	if calls, links := s.counts(); calls != 1 || links != 21 {
		t.Errorf("after Write: %d round trips for %d links, want 1 for 21", calls, links)
	}
	for range 5 {
		b.WriteLater(newRecord("d"))
	}
	b.Close()
	if calls, links := s.counts(); calls != 2 || links != 26 {
		t.Errorf("after Close: %d round trips for %d links, want 2 for 26", calls, links)
	}
	tr, err := b.Trace(ctx, trace)
	if err != nil || len(tr.Entries) != 26 || record.Verify(tr.Entries, tr.Tail) != nil {
		t.Fatalf("trace: %d entries, %v, verify %v", len(tr.Entries), err, record.Verify(tr.Entries, tr.Tail))
	}
}

// A trace whose chain expired starts a new chain: the book does not number
// its next entry after entries that are gone.
func TestBookAfterTheChainExpired(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s state.Store) {
		ctx := context.Background()
		b := record.NewBook(s, 300*time.Millisecond, slog.New(slog.DiscardHandler))
		defer b.Close()
		if err := b.Write(ctx, newRecord("b")); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			tr, err := b.Trace(ctx, trace)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Entries) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the chain never expired")
			}
		}
		if err := b.Write(ctx, newRecord("c")); err != nil {
			t.Fatal(err)
		}
		tr, err := b.Trace(ctx, trace)
		if err != nil {
			t.Fatal(err)
		}
		if err := record.Verify(tr.Entries, tr.Tail); err != nil || len(tr.Entries) != 1 {
			t.Errorf("after expiry: %d entries, Verify = %v", len(tr.Entries), err)
		}
	})
}

func TestBookWritesUpdatesAfterTheSnapshot(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s state.Store) {
		ctx := context.Background()
		b := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
		defer b.Close()
		r := newRecord("b")
		r.Trust = []string{"posture=verified"}
		if err := b.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
		r.State, r.Attempts, r.Error = record.Failed, 1, "connection refused"
		b.WriteLater(r)
		r.State, r.Status, r.Attempts, r.Error, r.Outcome = record.Delivered, 200, 2, "", "delivered with status 200"
		if err := b.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
		// A record read back (as a replay does) is written as updates too.
		got, err := b.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		got.State = record.Replayed
		if err := b.Write(ctx, got); err != nil {
			t.Fatal(err)
		}
		b.Close()

		tr, err := b.Trace(ctx, trace)
		if err != nil {
			t.Fatal(err)
		}
		entries := record.Decode(tr.Entries)
		if len(entries) != 4 || entries[0].Record == nil || entries[0].Update != nil {
			t.Fatalf("%d entries, the first %+v: want 4, the first a snapshot", len(entries), entries[0])
		}
		for i, e := range entries[1:] {
			if e.Record != nil || e.Update == nil || e.RecordID() != r.ID {
				t.Fatalf("entry %d is not an update of %s: %s", i+2, r.ID, tr.Entries[i+1])
			}
			if len(tr.Entries[i+1]) >= len(tr.Entries[0]) {
				t.Errorf("update %d is %d bytes, the snapshot %d", i+2, len(tr.Entries[i+1]), len(tr.Entries[0]))
			}
		}
		if err := record.Verify(tr.Entries, tr.Tail); err != nil {
			t.Fatal(err)
		}
		if len(tr.Records) != 1 {
			t.Fatalf("%d records, want 1", len(tr.Records))
		}
		m := tr.Records[0]
		if m.State != record.Replayed || m.Status != 200 || m.Attempts != 2 || m.Error != "" ||
			m.Outcome != "delivered with status 200" || m.To != "b" || len(m.Trust) != 1 || !m.Replayable {
			t.Errorf("merged record %+v", m)
		}
		again, err := b.Get(ctx, r.ID)
		if err != nil || again.State != record.Replayed || again.To != "b" || string(again.Request.Body) != `{"x":1}` {
			t.Errorf("Get = %+v, %v", again, err)
		}
	})
}

// TestBookCheckpointIsTheRequestAsGiven: a record's checkpoint is its
// request as it was when the record was given to the book, whether written
// now or queued; the writer may change the request's headers afterwards.
func TestBookCheckpointIsTheRequestAsGiven(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s state.Store) {
		ctx := context.Background()
		b := record.NewBook(s, time.Hour, slog.New(slog.DiscardHandler))
		now, later := newRecord("b"), newRecord("c")
		for _, r := range []*record.Record{now, later} {
			r.Request.Header = http.Header{"Signature": {"first"}}
		}
		if err := b.Write(ctx, now); err != nil {
			t.Fatal(err)
		}
		b.WriteLater(later)
		for _, r := range []*record.Record{now, later} {
			r.Request.Header.Set("Signature", "second try")
			r.State = record.Delivered
			b.WriteLater(r)
		}
		b.Close()
		for _, r := range []*record.Record{now, later} {
			got, err := b.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != record.Delivered || got.Request == nil || got.Request.Header.Get("Signature") != "first" {
				t.Errorf("record %s: state %s, checkpoint %+v; want delivered, with the headers it was given with",
					r.To, got.State, got.Request)
			}
		}
	})
}
