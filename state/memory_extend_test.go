package state_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
)

// entryOn is a test entry that names the tail it was built on, so that a
// chain shows whether each entry saw the one before it.
func entryOn(tail, name string) []byte { return []byte(name + "@" + tail) }

func TestMemoryExtend(t *testing.T) {
	t.Parallel()
	m := state.NewMemory(config.Memory{})
	defer m.Close()
	ctx := t.Context()
	const log = "{t}:chain"

	var tails []string
	for i, name := range []string{"e1", "e2", "e3"} {
		err := m.Extend(log, time.Hour, func(tail string) ([]byte, []state.KV) {
			tails = append(tails, tail)
			return entryOn(tail, name), []state.KV{{Key: "cp:" + name, Val: []byte("v" + strconv.Itoa(i))}}
		})
		if err != nil {
			t.Fatalf("Extend %s: %v", name, err)
		}
	}
	c, err := m.ReadChain(ctx, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Entries) != 3 || tails[0] != "" {
		t.Fatalf("chain %q built on tails %q: want 3 entries, the first on no tail", c.Entries, tails)
	}
	for i := 1; i < 3; i++ {
		if want := state.ChainTail(int64(i), c.Entries[i-1]); tails[i] != want {
			t.Errorf("entry %d was built on %q, want the tail of entry %d, %q", i+1, tails[i], i, want)
		}
	}
	if want := state.ChainTail(3, c.Entries[2]); c.Tail != want {
		t.Errorf("tail %q, want %q", c.Tail, want)
	}
	if v, err := m.Attached(ctx, log, "cp:e2"); err != nil || string(v) != "v1" {
		t.Errorf("Attached(cp:e2) = %q, %v", v, err)
	}

	// An Extend after AppendChained builds on what AppendChained wrote, and
	// a link numbered from a tail learned before the Extend is refused.
	if _, err := m.AppendChained(ctx, []state.Link{{Log: "{u}:chain", Seq: 1, Entry: []byte("a1"), TTL: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Extend("{u}:chain", time.Hour, func(tail string) ([]byte, []state.KV) { return entryOn(tail, "x2"), nil }); err != nil {
		t.Fatal(err)
	}
	res, err := m.AppendChained(ctx, []state.Link{{Log: "{u}:chain", Seq: 2, Entry: []byte("a2"), TTL: time.Hour}})
	if err != nil || res[0].OK || res[0].Tail != state.ChainTail(2, entryOn(state.ChainTail(1, []byte("a1")), "x2")) {
		t.Fatalf("stale link after Extend: %+v, %v", res, err)
	}
}

func TestMemoryExtendRefuses(t *testing.T) {
	t.Parallel()
	t.Run("another kind", func(t *testing.T) {
		m := state.NewMemory(config.Memory{})
		defer m.Close()
		if err := m.Set(t.Context(), "k", []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
		called := false
		err := m.Extend("k", time.Hour, func(string) ([]byte, []state.KV) { called = true; return []byte("e"), nil })
		if !errors.Is(err, state.ErrWrongKind) || called {
			t.Fatalf("Extend of a value = %v (build called: %v), want ErrWrongKind without building", err, called)
		}
	})
	t.Run("full of held claims", func(t *testing.T) {
		m := state.NewMemory(config.Memory{MaxEntries: 2})
		defer m.Close()
		claim(t, m, "h1", "h2")
		err := m.Extend("{t}:chain", time.Hour, func(string) ([]byte, []state.KV) {
			return []byte("e1"), []state.KV{{Key: "cp", Val: []byte("v")}}
		})
		wantFull(t, "Extend", err)
		c, err := m.ReadChain(t.Context(), "{t}:chain")
		if err != nil || len(c.Entries) != 0 {
			t.Fatalf("chain after a refused Extend: %q, %v", c.Entries, err)
		}
		if _, err := m.Attached(t.Context(), "{t}:chain", "cp"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("attached after a refused Extend: %v", err)
		}
		present(t, m, "h1", "h2")
	})
}

func TestMemoryExtendTTL(t *testing.T) {
	t.Parallel()
	m := state.NewMemory(config.Memory{})
	defer m.Close()
	build := func(tail string) ([]byte, []state.KV) { return entryOn(tail, "e"), nil }
	if err := m.Extend("{short}:chain", 50*time.Millisecond, build); err != nil {
		t.Fatal(err)
	}
	if err := m.Extend("{kept}:chain", 50*time.Millisecond, build); err != nil {
		t.Fatal(err)
	}
	if err := m.Extend("{kept}:chain", time.Hour, build); err != nil { // refreshes the chain's TTL
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	for log, want := range map[string]int{"{short}:chain": 0, "{kept}:chain": 2} {
		c, err := m.ReadChain(t.Context(), log)
		if err != nil || len(c.Entries) != want {
			t.Errorf("%s after 100ms: %d entries, %v; want %d", log, len(c.Entries), err, want)
		}
	}
}

// TestMemoryExtendConcurrent: writers extending one chain at once each
// build on the entry before theirs, so the chain has every entry, each
// naming its predecessor's tail.
func TestMemoryExtendConcurrent(t *testing.T) {
	t.Parallel()
	m := state.NewMemory(config.Memory{})
	defer m.Close()
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				name := "w" + strconv.Itoa(w) + "." + strconv.Itoa(i)
				if err := m.Extend("{t}:chain", time.Hour, func(tail string) ([]byte, []state.KV) { return entryOn(tail, name), nil }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	c, err := m.ReadChain(t.Context(), "{t}:chain")
	if err != nil || len(c.Entries) != writers*each {
		t.Fatalf("%d entries, %v; want %d", len(c.Entries), err, writers*each)
	}
	for i, e := range c.Entries {
		_, tail, _ := strings.Cut(string(e), "@")
		want := ""
		if i > 0 {
			want = state.ChainTail(int64(i), c.Entries[i-1])
		}
		if tail != want {
			t.Fatalf("entry %d was built on %q, want %q", i+1, tail, want)
		}
	}
}

// TestMemoryExtendRebuilds: an entry is built outside the store's lock, so
// a writer that extends the chain meanwhile makes Extend build it again, on
// the new tail, and the chain holds both, each on the tail before it.
func TestMemoryExtendRebuilds(t *testing.T) {
	t.Parallel()
	m := state.NewMemory(config.Memory{})
	defer m.Close()
	const log = "{t}:chain"
	if err := m.Extend(log, time.Hour, func(tail string) ([]byte, []state.KV) { return entryOn(tail, "e1"), nil }); err != nil {
		t.Fatal(err)
	}
	var tails []string
	err := m.Extend(log, time.Hour, func(tail string) ([]byte, []state.KV) {
		tails = append(tails, tail)
		if len(tails) == 1 {
			// Another writer gets in while this entry is being built.
			if err := m.Extend(log, time.Hour, func(tail string) ([]byte, []state.KV) { return entryOn(tail, "other"), nil }); err != nil {
				t.Error(err)
			}
		}
		return entryOn(tail, "mine"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.ReadChain(t.Context(), log)
	if err != nil || len(c.Entries) != 3 {
		t.Fatalf("chain %q, %v; want e1, other, mine", c.Entries, err)
	}
	if len(tails) != 2 || tails[0] != state.ChainTail(1, c.Entries[0]) || tails[1] != state.ChainTail(2, c.Entries[1]) {
		t.Errorf("built on %q; want the tail of e1, then of the other writer's entry", tails)
	}
	for i, want := range []string{"e1@", "other@", "mine@"} {
		if !strings.HasPrefix(string(c.Entries[i]), want) {
			t.Errorf("entry %d is %q, want %s…", i+1, c.Entries[i], want)
		}
	}
	if want := state.ChainTail(2, c.Entries[1]); !strings.HasSuffix(string(c.Entries[2]), "@"+want) {
		t.Errorf("the last entry %q was not built on the other writer's", c.Entries[2])
	}
}
