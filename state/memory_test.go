package state_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/storetest"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  config.Memory
	}{
		{"unbounded", config.Memory{}},
		{"default bounds", config.Memory{MaxEntries: config.DefaultMemoryEntries, MaxBytes: config.DefaultMemoryBytes}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(*testing.T) state.Store { return state.NewMemory(tc.cfg) })
		})
	}
}

// never is a janitor interval long enough that tests see only what the
// store does on its own when it needs room.
const never = time.Hour

func TestMemoryBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  config.Memory
		run  func(t *testing.T, m *state.Memory)
	}{
		{"evicts the oldest entry first", config.Memory{MaxEntries: 3}, func(t *testing.T, m *state.Memory) {
			set(t, m, "a", "b", "c", "d")
			absent(t, m, "a")
			present(t, m, "b", "c", "d")
		}},
		{"a rewrite makes an entry young again", config.Memory{MaxEntries: 3}, func(t *testing.T, m *state.Memory) {
			set(t, m, "a", "b", "c", "a", "d")
			absent(t, m, "b")
			present(t, m, "a", "c", "d")
		}},
		{"held claims are never evicted", config.Memory{MaxEntries: 2}, func(t *testing.T, m *state.Memory) {
			claim(t, m, "held")
			set(t, m, "a", "b", "c")
			present(t, m, "held", "c")
			absent(t, m, "a", "b")
		}},
		{"full of held claims refuses writes", config.Memory{MaxEntries: 2}, func(t *testing.T, m *state.Memory) {
			ctx := t.Context()
			claim(t, m, "h1", "h2")
			_, _, err := m.Claim(ctx, "h3", []byte("v"), time.Hour)
			wantFull(t, "Claim", err)
			wantFull(t, "Set", m.Set(ctx, "x", []byte("v"), 0))
			_, err = m.Append(ctx, "log", []byte("v"), 0)
			wantFull(t, "Append", err)
			wantFull(t, "IndexAdd", m.IndexAdd(ctx, "idx", "m", 1, 0))
			present(t, m, "h1", "h2")
			if ok, err := m.Release(ctx, "h1", []byte("h1")); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			set(t, m, "x")
			present(t, m, "h2", "x")
		}},
		{"a failed write evicts nothing", config.Memory{MaxEntries: 3}, func(t *testing.T, m *state.Memory) {
			claim(t, m, "h1", "h2")
			set(t, m, "a")
			ctx := t.Context()
			for i := range 2 {
				_, err := m.Append(ctx, "log", fmt.Appendf(nil, "%d", i), 0)
				if i == 0 && err != nil {
					t.Fatalf("first Append: %v", err)
				}
				if i == 1 {
					wantFull(t, "second Append", err)
				}
			}
			absent(t, m, "a")
			wantUsage(t, m, 3, -1)
		}},
		{"expired claims make room", config.Memory{MaxEntries: 2}, func(t *testing.T, m *state.Memory) {
			ctx := t.Context()
			for _, k := range []string{"h1", "h2"} {
				if ok, _, err := m.Claim(ctx, k, []byte(k), 50*time.Millisecond); err != nil || !ok {
					t.Fatalf("Claim(%s) = %v, %v", k, ok, err)
				}
			}
			waitAbsent(t, m, "h1")
			waitAbsent(t, m, "h2")
			set(t, m, "x", "y")
			present(t, m, "x", "y")
		}},
		{"swap makes a claim evictable", config.Memory{MaxEntries: 2}, func(t *testing.T, m *state.Memory) {
			claim(t, m, "h1", "h2")
			if ok, err := m.Swap(t.Context(), "h1", []byte("h1"), []byte("done"), 0); err != nil || !ok {
				t.Fatalf("Swap = %v, %v", ok, err)
			}
			set(t, m, "x")
			absent(t, m, "h1")
			present(t, m, "h2", "x")
		}},
		{"log entries and index members count as entries", config.Memory{MaxEntries: 4}, func(t *testing.T, m *state.Memory) {
			ctx := t.Context()
			set(t, m, "a")
			for i := range 2 {
				if _, err := m.Append(ctx, "log", fmt.Appendf(nil, "%d", i), 0); err != nil {
					t.Fatal(err)
				}
			}
			wantUsage(t, m, 3, -1)
			for _, member := range []string{"x", "y"} {
				if err := m.IndexAdd(ctx, "idx", member, 1, 0); err != nil {
					t.Fatal(err)
				}
			}
			absent(t, m, "a")
			wantUsage(t, m, 4, -1)
			if err := m.IndexAdd(ctx, "idx", "x", 2, 0); err != nil {
				t.Fatalf("rescoring at the bound: %v", err)
			}
			wantUsage(t, m, 4, -1)
		}},
		{"byte bound", config.Memory{MaxBytes: 30}, func(t *testing.T, m *state.Memory) {
			ctx := t.Context()
			for _, k := range []string{"a", "b", "c", "d"} {
				if err := m.Set(ctx, k, []byte("123456789"), 0); err != nil { // 10 bytes with the key
					t.Fatal(err)
				}
			}
			absent(t, m, "a")
			present(t, m, "b", "c", "d")
			wantUsage(t, m, 3, 30)
			wantFull(t, "oversized Set", m.Set(ctx, "big", make([]byte, 30), 0))
			present(t, m, "b", "c", "d")
			if err := m.Set(ctx, "b", []byte("1"), 0); err != nil {
				t.Fatal(err)
			}
			wantUsage(t, m, 3, 22)
			if _, err := m.Append(ctx, "l", []byte("1234567"), 0); err != nil { // 8 bytes
				t.Fatal(err)
			}
			present(t, m, "b", "c", "d")
			wantUsage(t, m, 4, 30)
			if err := m.IndexAdd(ctx, "i", "m", 1, 0); err != nil { // 1+1+8 bytes
				t.Fatal(err)
			}
			absent(t, m, "c") // the oldest, now that b was rewritten
			present(t, m, "b", "d")
			wantUsage(t, m, 4, 30)
		}},
		{"a log is not evicted for its own append", config.Memory{MaxBytes: 10}, func(t *testing.T, m *state.Memory) {
			ctx := t.Context()
			if _, err := m.Append(ctx, "l", []byte("12345"), 0); err != nil {
				t.Fatal(err)
			}
			_, err := m.Append(ctx, "l", []byte("12345"), 0)
			wantFull(t, "Append", err)
			got, err := m.Range(ctx, "l", 0, -1)
			if err != nil || len(got) != 1 {
				t.Fatalf("Range = %q, %v; want the first entry", got, err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := state.NewMemoryEvery(tc.cfg, never)
			t.Cleanup(func() { _ = m.Close() })
			tc.run(t, m)
		})
	}
}

// TestMemoryAccounting runs random operations on a small store, checking
// the bounds after each, and then deletes everything: usage must return to
// zero, or some path miscounts.
func TestMemoryAccounting(t *testing.T) {
	t.Parallel()
	const maxEntries, maxBytes = 20, 200
	m := state.NewMemoryEvery(config.Memory{MaxEntries: maxEntries, MaxBytes: maxBytes}, time.Millisecond)
	t.Cleanup(func() { _ = m.Close() })
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	for i := range 5000 {
		k := keys[rng.IntN(len(keys))]
		val := make([]byte, rng.IntN(24))
		ttl := time.Duration(rng.IntN(3)) * time.Millisecond // 0 (none), 1ms or 2ms
		var err error
		switch rng.IntN(9) {
		case 0:
			_, _, err = m.Claim(ctx, k, val, ttl)
		case 1:
			_, err = m.Swap(ctx, k, val, []byte("next"), ttl)
		case 2:
			_, err = m.Release(ctx, k, val)
		case 3:
			err = m.Set(ctx, k, val, ttl)
		case 4:
			err = m.Delete(ctx, k)
		case 5:
			_, err = m.Append(ctx, k, val, ttl)
		case 6:
			err = m.IndexAdd(ctx, k, string(val[:min(len(val), 2)]), float64(len(val)), ttl)
		case 7:
			err = m.IndexRemove(ctx, k, string(val[:min(len(val), 2)]))
		case 8:
			_, err = m.Renew(ctx, k, val, ttl)
		}
		if err != nil && !errors.Is(err, state.ErrFull) && !errors.Is(err, state.ErrWrongKind) {
			t.Fatalf("op %d: %v", i, err)
		}
		if n, b := m.Usage(); n < 0 || b < 0 || n > maxEntries || b > maxBytes {
			t.Fatalf("op %d: usage %d entries, %d bytes; bounds %d, %d", i, n, b, maxEntries, maxBytes)
		}
	}
	for _, k := range keys {
		if err := m.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	wantUsage(t, m, 0, 0)
}

func TestMemoryJanitorReclaims(t *testing.T) {
	t.Parallel()
	m := state.NewMemoryEvery(config.Memory{}, 5*time.Millisecond)
	t.Cleanup(func() { _ = m.Close() })
	for i := range 3000 { // more than one sweep batch
		if err := m.Set(t.Context(), fmt.Sprint(i), []byte("v"), 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Set(t.Context(), "keep", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the janitor to reclaim expired entries", func() bool {
		n, b := m.Usage()
		return n == 1 && b == 5
	})
	present(t, m, "keep")
}

// TestMemoryMarkSetsCounted: the memory store counts its resident mark sets
// as they are made, deleted, evicted and expired, so that MarksMayHold
// answers a store with none without its lock, and never says no to one
// that has marks.
func TestMemoryMarkSetsCounted(t *testing.T) {
	t.Parallel()
	m := state.NewMemoryEvery(config.Memory{MaxEntries: 4}, 5*time.Millisecond)
	t.Cleanup(func() { _ = m.Close() })
	ctx := t.Context()
	count := func(want int64) {
		t.Helper()
		if got := state.MarkSets(m); got != want {
			t.Fatalf("%d mark sets counted, want %d", got, want)
		}
	}
	count(0)
	if m.MarksMayHold("a") {
		t.Fatal("MarksMayHold in a store with no marks")
	}
	for _, k := range []string{"a", "b"} {
		if err := m.MarkAdd(ctx, k, []uint64{1}, "src", time.Hour, 10); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.MarkAdd(ctx, "a", []uint64{2}, "src", time.Hour, 10); err != nil {
		t.Fatal(err)
	}
	count(2)
	if !m.MarksMayHold("a") || m.MarksMayHold("c") {
		t.Fatal("MarksMayHold does not tell a set from an absent one")
	}
	if err := m.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	count(1)
	for i := range 8 { // values that evict b
		if err := m.Set(ctx, fmt.Sprint(i), []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
	}
	count(0)
	if err := m.MarkAdd(ctx, "d", []uint64{1}, "src", 20*time.Millisecond, 10); err != nil {
		t.Fatal(err)
	}
	count(1)
	waitFor(t, "the expired mark set to be reclaimed", func() bool { return state.MarkSets(m) == 0 })
	if m.MarksMayHold("d") {
		t.Fatal("MarksMayHold of an expired set")
	}
}

// TestMemoryCloseStopsJanitor is not parallel: it counts janitor goroutines
// in the whole process, and parallel tests (which make stores of their own)
// only start once the sequential ones have finished.
func TestMemoryCloseStopsJanitor(t *testing.T) {
	before := janitors()
	stores := make([]*state.Memory, 10)
	for i := range stores {
		stores[i] = state.NewMemoryEvery(config.Memory{}, time.Millisecond)
	}
	waitFor(t, "10 janitors to run", func() bool { return janitors() == before+10 })
	for _, m := range stores {
		if err := m.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	waitFor(t, "the janitors to exit", func() bool { return janitors() == before })
	// A closed store still answers.
	if err := stores[0].Set(t.Context(), "k", []byte("v"), 0); err != nil {
		t.Fatalf("Set after Close: %v", err)
	}
	present(t, stores[0], "k")
}

func TestOpenMemory(t *testing.T) {
	t.Parallel()
	s, err := state.Open(config.Store{Memory: config.Memory{MaxEntries: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, ok := s.(*state.Memory); !ok {
		t.Fatalf("Open without redis = %T, want *state.Memory", s)
	}
}

func janitors() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "state.(*Memory).janitor(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func set(t *testing.T, m *state.Memory, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := m.Set(t.Context(), k, []byte(k), 0); err != nil {
			t.Fatalf("Set(%s): %v", k, err)
		}
	}
}

// claim claims each key with the key as its value.
func claim(t *testing.T, m *state.Memory, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if ok, _, err := m.Claim(t.Context(), k, []byte(k), time.Hour); err != nil || !ok {
			t.Fatalf("Claim(%s) = %v, %v", k, ok, err)
		}
	}
}

func present(t *testing.T, m *state.Memory, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := m.Get(t.Context(), k); err != nil {
			t.Errorf("Get(%s): %v, want present", k, err)
		}
	}
}

func absent(t *testing.T, m *state.Memory, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v, err := m.Get(t.Context(), k); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("Get(%s) = %q, %v; want ErrNotFound", k, v, err)
		}
	}
}

func waitAbsent(t *testing.T, m *state.Memory, k string) {
	t.Helper()
	waitFor(t, k+" to expire", func() bool {
		_, err := m.Get(context.Background(), k)
		return errors.Is(err, state.ErrNotFound)
	})
}

func wantFull(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, state.ErrFull) {
		t.Fatalf("%s: err = %v, want ErrFull", what, err)
	}
}

// wantUsage checks Usage; a negative want is not checked.
func wantUsage(t *testing.T, m *state.Memory, entries, bytes int64) {
	t.Helper()
	n, b := m.Usage()
	if (entries >= 0 && n != entries) || (bytes >= 0 && b != bytes) {
		t.Fatalf("Usage = %d entries, %d bytes; want %d, %d", n, b, entries, bytes)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	stop := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(stop) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The memory store keeps a chained link's bytes as they are; a later write
// of the same attached value must not write into them (a record's bytes may
// be part of its chain entry's).
func TestMemoryKeptLinkBytesNeverWrittenInto(t *testing.T) {
	m := state.NewMemory(config.Memory{})
	defer m.Close()
	ctx := context.Background()
	entry := []byte(`{"seq":1,"record":{"id":"r1","state":"sent"}}`)
	rec := entry[19 : len(entry)-1] // the record inside the entry
	res, err := m.AppendChained(ctx, []state.Link{{Log: "{t}:chain", Seq: 1, Entry: entry,
		Attach: []state.KV{{Key: "rec", Val: rec}}, TTL: time.Hour}})
	if err != nil || !res[0].OK {
		t.Fatalf("AppendChained = %+v, %v", res, err)
	}
	res, err = m.AppendChained(ctx, []state.Link{{Log: "{t}:chain", Seq: 2, Entry: []byte("{}"),
		Attach: []state.KV{{Key: "rec", Val: []byte(`{"id":"r1","state":"dead"}`)}}, TTL: time.Hour}})
	if err != nil || !res[0].OK {
		t.Fatalf("AppendChained = %+v, %v", res, err)
	}
	c, err := m.ReadChain(ctx, "{t}:chain")
	if err != nil || len(c.Entries) != 2 || string(c.Entries[0]) != `{"seq":1,"record":{"id":"r1","state":"sent"}}` {
		t.Fatalf("chain after a write of the record's key: %q, %v", c.Entries, err)
	}
	if got, _ := m.Attached(ctx, "{t}:chain", "rec"); string(got) != `{"id":"r1","state":"dead"}` {
		t.Fatalf("record = %q", got)
	}
}
