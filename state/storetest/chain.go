package storetest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/batonproxy/baton/state"
)

func chainCases() []testCase {
	return []testCase{
		{"AppendChained/links and attachments", testChainLinks},
		{"AppendChained/a long chain's attachments", testChainManyAttached},
		{"AppendChained/a stale link learns the tail", testChainStale},
		{"AppendChained/a stale link learns a tail far ahead", testChainFarAhead},
		{"AppendChained/batch of several chains", testChainBatch},
		{"AppendChained/ttl", testChainTTL},
		{"AppendChained/concurrent writers keep one chain", testChainConcurrent},
		{"ReadChain/absent chain", testChainAbsent},
		{"ChainTails/each chain's last entry's, however long the chain", testChainTails},
		{"ClaimMany", testClaimMany},
	}
}

// chainKey puts a test's keys under one hash tag, as callers must.
func chainKey(t *testing.T, name string) string { return "{" + t.Name() + "}:" + name }

// tailOf is the tail of a chain whose last entry is entry number seq.
func tailOf(seq int, entry string) string { return state.ChainTail(int64(seq), []byte(entry)) }

func link1(t *testing.T, s state.Store, l state.Link) state.LinkResult {
	t.Helper()
	res, err := s.AppendChained(t.Context(), []state.Link{l})
	must(t, "AppendChained", err)
	if len(res) != 1 {
		t.Fatalf("AppendChained returned %d results for 1 link", len(res))
	}
	return res[0]
}

// grow appends n entries, "x1" to "xN", to the chain at log, from its empty
// state.
func grow(t *testing.T, s state.Store, log string, n int) {
	t.Helper()
	for seq := 1; seq <= n; seq++ {
		if r := link1(t, s, state.Link{Log: log, Seq: int64(seq), Entry: []byte("x" + strconv.Itoa(seq)), TTL: long}); !r.OK {
			t.Fatalf("link %d: %+v", seq, r)
		}
	}
}

// wantChain reads the chain at log and checks its entries and that its tail
// is the tail of the last one.
func wantChain(t *testing.T, s state.Store, log string, entries ...string) {
	t.Helper()
	c, err := s.ReadChain(t.Context(), log)
	must(t, "ReadChain", err)
	got := make([]string, len(c.Entries))
	for i, e := range c.Entries {
		got[i] = string(e)
	}
	tail := ""
	if len(entries) > 0 {
		tail = tailOf(len(entries), entries[len(entries)-1])
	}
	if strings.Join(got, ",") != strings.Join(entries, ",") || len(got) != len(entries) || c.Tail != tail {
		t.Fatalf("chain %s = %q with tail %q, want %q with tail %q", log, got, c.Tail, entries, tail)
	}
}

func wantAttached(t *testing.T, s state.Store, log, name, want string) {
	t.Helper()
	got, err := s.Attached(t.Context(), log, name)
	if want == "" {
		if !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("Attached(%s) = %q, %v; want ErrNotFound", name, got, err)
		}
		return
	}
	must(t, "Attached "+name, err)
	if string(got) != want {
		t.Fatalf("Attached(%s) = %q, want %q", name, got, want)
	}
}

func testChainLinks(t *testing.T, s state.Store) {
	log := chainKey(t, "log")
	r := link1(t, s, state.Link{Log: log, Seq: 1, Entry: []byte("e1"),
		Attach: []state.KV{{Key: "cp:r1", Val: []byte("v1")}}, TTL: long})
	if !r.OK || r.Err != nil || r.Tail != "" {
		t.Fatalf("first link: %+v", r)
	}
	r = link1(t, s, state.Link{Log: log, Seq: 2, Entry: []byte("e2"),
		Attach: []state.KV{{Key: "cp:r2", Val: []byte("v2")}, {Key: "cp:r1", Val: []byte("v1'")}}, TTL: long})
	if !r.OK {
		t.Fatalf("second link: %+v", r)
	}
	wantChain(t, s, log, "e1", "e2")
	wantAttached(t, s, log, "cp:r1", "v1'")
	wantAttached(t, s, log, "cp:r2", "v2")
	wantAttached(t, s, log, "cp:r3", "")
}

// testChainManyAttached attaches a value per link to a long chain, then
// replaces some of them: each name keeps its latest value.
func testChainManyAttached(t *testing.T, s state.Store) {
	log := chainKey(t, "log")
	const n = 40
	for seq := 1; seq <= n; seq++ {
		name := "cp:r" + strconv.Itoa(seq)
		if r := link1(t, s, state.Link{Log: log, Seq: int64(seq), Entry: []byte("e" + strconv.Itoa(seq)), TTL: long,
			Attach: []state.KV{{Key: name, Val: []byte("v" + strconv.Itoa(seq))}}}); !r.OK {
			t.Fatalf("link %d: %+v", seq, r)
		}
		if seq == 3 || seq == n {
			// Replaced while the chain has few attachments, and once it has many.
			link1(t, s, state.Link{Log: log, Seq: 1, Entry: []byte("stale"),
				Attach: []state.KV{{Key: "cp:r2", Val: []byte("v2@" + strconv.Itoa(seq))}}})
		}
	}
	for seq := 1; seq <= n; seq++ {
		want := "v" + strconv.Itoa(seq)
		if seq == 2 {
			want = "v2@" + strconv.Itoa(n)
		}
		wantAttached(t, s, log, "cp:r"+strconv.Itoa(seq), want)
	}
	wantAttached(t, s, log, "cp:r0", "")
	wantAttached(t, s, log, "cp:r"+strconv.Itoa(n+1), "")
}

func testChainStale(t *testing.T, s state.Store) {
	log := chainKey(t, "log")
	link1(t, s, state.Link{Log: log, Seq: 1, Entry: []byte("e1"), TTL: long})
	r := link1(t, s, state.Link{Log: log, Seq: 1, Entry: []byte("other"), TTL: long,
		Attach: []state.KV{{Key: "cp:other", Val: []byte("v")}}})
	if want := tailOf(1, "e1"); r.OK || r.Err != nil || r.Tail != want {
		t.Fatalf("stale link: %+v, want not OK with tail %s", r, want)
	}
	wantChain(t, s, log, "e1")
	wantAttached(t, s, log, "cp:other", "v") // written all the same, as documented
	// Built on the tail it learned, it lands.
	if r := link1(t, s, state.Link{Log: log, Seq: 2, Entry: []byte("other"), TTL: long}); !r.OK {
		t.Fatalf("relinked: %+v", r)
	}
	wantChain(t, s, log, "e1", "other")
}

func testChainFarAhead(t *testing.T, s state.Store) {
	log := chainKey(t, "log")
	grow(t, s, log, 40) // more than one read to find the end (Redis reads 16 at a time)
	r := link1(t, s, state.Link{Log: log, Seq: 2, Entry: []byte("late"), TTL: long})
	if want := tailOf(40, "x40"); r.OK || r.Err != nil || r.Tail != want {
		t.Fatalf("link 38 entries behind: %+v, want the tail %s", r, want)
	}
}

func testChainBatch(t *testing.T, s state.Store) {
	a, b, c := chainKey(t, "a"), "{"+t.Name()+"-b}:b", "{"+t.Name()+"-c}:c"
	link1(t, s, state.Link{Log: b, Seq: 1, Entry: []byte("b1"), TTL: long})
	res, err := s.AppendChained(t.Context(), []state.Link{
		{Log: a, Seq: 1, Entry: []byte("a1"), TTL: long, Attach: []state.KV{{Key: "cp:a1", Val: []byte("cpa1")}}},
		{Log: b, Seq: 1, Entry: []byte("stale"), TTL: long},
		{Log: a, Seq: 2, Entry: []byte("a2"), TTL: long},
		{Log: b, Seq: 2, Entry: []byte("after the stale one"), TTL: long},
		{Log: c, Seq: 1, Entry: []byte("c1")},
		{Log: a, Seq: 3, Entry: []byte("a3"), TTL: long, Attach: []state.KV{{Key: "cp:a3", Val: []byte("cpa3")}}},
	})
	must(t, "AppendChained", err)
	if len(res) != 6 {
		t.Fatalf("%d results for 6 links", len(res))
	}
	b1 := tailOf(1, "b1")
	for i, want := range []state.LinkResult{{OK: true}, {Tail: b1}, {OK: true}, {Tail: b1}, {OK: true}, {OK: true}} {
		if res[i] != want {
			t.Errorf("link %d: %+v, want %+v", i, res[i], want)
		}
	}
	wantChain(t, s, a, "a1", "a2", "a3")
	wantChain(t, s, b, "b1")
	wantChain(t, s, c, "c1")
	wantAttached(t, s, a, "cp:a1", "cpa1")
	wantAttached(t, s, a, "cp:a3", "cpa3")
}

func testChainTTL(t *testing.T, s state.Store) {
	// A later link refreshes the TTL of the whole chain, attachments included.
	log := chainKey(t, "log")
	link1(t, s, state.Link{Log: log, Seq: 1, Entry: []byte("e1"), TTL: short,
		Attach: []state.KV{{Key: "cp", Val: []byte("v")}}})
	link1(t, s, state.Link{Log: log, Seq: 2, Entry: []byte("e2"), TTL: long})
	outlive(t, s)
	wantChain(t, s, log, "e1", "e2")
	wantAttached(t, s, log, "cp", "v")

	// In one batch, the chain gets the longest TTL its links ask for.
	batch := chainKey(t, "batch")
	_, err := s.AppendChained(t.Context(), []state.Link{
		{Log: batch, Seq: 1, Entry: []byte("e1"), TTL: long},
		{Log: batch, Seq: 2, Entry: []byte("e2"), TTL: short},
	})
	must(t, "AppendChained", err)
	outlive(t, s)
	wantChain(t, s, batch, "e1", "e2")

	gone := chainKey(t, "gone")
	link1(t, s, state.Link{Log: gone, Seq: 1, Entry: []byte("e1"), TTL: short,
		Attach: []state.KV{{Key: "cp", Val: []byte("v")}}})
	eventually(t, "waiting for the chain to expire", func(ctx context.Context) (bool, error) {
		c, err := s.ReadChain(ctx, gone)
		if err != nil {
			return false, err
		}
		_, aerr := s.Attached(ctx, gone, "cp")
		return len(c.Entries) == 0 && c.Tail == "" && errors.Is(aerr, state.ErrNotFound), nil
	})
}

func testChainAbsent(t *testing.T, s state.Store) {
	wantChain(t, s, chainKey(t, "none"))
	wantAttached(t, s, chainKey(t, "none"), "cp", "")
}

// testChainTails: an absent chain has no tail; a chain's is its last
// entry's, for chains shorter and longer than one read of Redis's probe, and
// one whose length is a multiple of it; several chains are read at once,
// each for its own.
func testChainTails(t *testing.T, s state.Store) {
	log, short, none := chainKey(t, "log"), chainKey(t, "short"), chainKey(t, "none")
	if r := link1(t, s, state.Link{Log: short, Seq: 1, Entry: []byte("s1"), TTL: long}); !r.OK {
		t.Fatalf("link: %+v", r)
	}
	tails := func() []string {
		t.Helper()
		got, err := s.ChainTails(t.Context(), []string{log, none, short})
		must(t, "ChainTails", err)
		if len(got) != 3 {
			t.Fatalf("ChainTails of 3 chains returned %d tails", len(got))
		}
		if got[1] != "" || got[2] != tailOf(1, "s1") {
			t.Fatalf("ChainTails: an absent chain's %q (want none), a one-entry chain's %q (want %q)", got[1], got[2], tailOf(1, "s1"))
		}
		return got
	}
	if got := tails()[0]; got != "" {
		t.Fatalf("ChainTails of an absent chain = %q, want none", got)
	}
	n := 0
	for _, upTo := range []int{1, 3, 15, 16, 31, 40} {
		for n < upTo {
			n++
			if r := link1(t, s, state.Link{Log: log, Seq: int64(n), Entry: []byte("x" + strconv.Itoa(n)), TTL: long}); !r.OK {
				t.Fatalf("link %d: %+v", n, r)
			}
		}
		if got, want := tails()[0], tailOf(n, "x"+strconv.Itoa(n)); got != want {
			t.Fatalf("ChainTails of %d entries = %q, want %q", n, got, want)
		}
	}
}

func testChainConcurrent(t *testing.T, s state.Store) {
	log := chainKey(t, "log")
	const writers, each = 8, 10
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev, seq, n := "", 0, 0
			for n < each {
				entry := []byte(prev + ">" + strconv.Itoa(w) + "-" + strconv.Itoa(n))
				r := link1(t, s, state.Link{Log: log, Seq: int64(seq + 1), Entry: entry, TTL: long})
				switch {
				case r.Err != nil:
					t.Error(r.Err)
					return
				case r.OK:
					prev, seq, n = state.ChainTail(int64(seq+1), entry), seq+1, n+1
				default: // someone else linked: build on theirs
					prev = r.Tail
					seq, _ = strconv.Atoi(prev[:strings.IndexByte(prev, ':')])
				}
			}
		}()
	}
	wg.Wait()
	c, err := s.ReadChain(t.Context(), log)
	must(t, "ReadChain", err)
	if len(c.Entries) != writers*each {
		t.Fatalf("%d entries, want %d", len(c.Entries), writers*each)
	}
	// Every entry names the previous entry's tail: one unbroken chain.
	prev := ""
	for i, e := range c.Entries {
		p, _, ok := strings.Cut(string(e), ">")
		if !ok || p != prev {
			t.Fatalf("entry %d %q does not follow %q", i, e, prev)
		}
		prev = state.ChainTail(int64(i+1), e)
	}
	if c.Tail != prev {
		t.Fatalf("tail %q, want %q", c.Tail, prev)
	}
}

func testClaimMany(t *testing.T, s state.Store) {
	a, b := key(t, "a"), key(t, "b")
	if ok, _, err := s.Claim(t.Context(), b, []byte("held"), long); err != nil || !ok {
		t.Fatalf("Claim: %v %v", ok, err)
	}
	res, err := s.ClaimMany(t.Context(), []state.ClaimOp{{Key: a, Val: []byte("x"), TTL: long}, {Key: b, Val: []byte("y"), TTL: long}})
	must(t, "ClaimMany", err)
	if len(res) != 2 || !res[0].OK || res[1].OK || string(res[1].Cur) != "held" {
		t.Fatalf("ClaimMany = %+v", res)
	}
	wantValue(t, s, a, []byte("x"))
	wantValue(t, s, b, []byte("held"))
}
