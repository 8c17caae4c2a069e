package storetest

import (
	"strconv"
	"sync"
	"testing"

	"github.com/batonproxy/baton/state"
)

func chainCases() []testCase {
	return []testCase{
		{"AppendChained/links and sets", testChainLinks},
		{"AppendChained/stale prev returns the tail", testChainStale},
		{"AppendChained/batch of independent logs", testChainBatch},
		{"AppendChained/batch with sets, with and without ttl", testChainBatchSets},
		{"AppendChained/concurrent writers keep one chain", testChainConcurrent},
		{"ClaimMany", testClaimMany},
	}
}

// chainKey puts a test's keys under one hash tag, as callers must.
func chainKey(t *testing.T, name string) string { return "{" + t.Name() + "}:" + name }

func link1(t *testing.T, s state.Store, l state.Link) state.LinkResult {
	t.Helper()
	res, err := s.AppendChained(t.Context(), []state.Link{l})
	must(t, "AppendChained", err)
	if len(res) != 1 {
		t.Fatalf("AppendChained returned %d results for 1 link", len(res))
	}
	return res[0]
}

func testChainLinks(t *testing.T, s state.Store) {
	log, rec := chainKey(t, "log"), chainKey(t, "rec")
	r := link1(t, s, state.Link{Log: log, Prev: "", Tail: "1:a", Entry: []byte("e1"),
		Sets: []state.KV{{Key: rec, Val: []byte("v1")}}, TTL: long})
	if !r.OK || r.Err != nil || r.Tail != "1:a" {
		t.Fatalf("first link: %+v", r)
	}
	r = link1(t, s, state.Link{Log: log, Prev: "1:a", Tail: "2:b", Entry: []byte("e2"),
		Sets: []state.KV{{Key: rec, Val: []byte("v2")}}, TTL: long})
	if !r.OK {
		t.Fatalf("second link: %+v", r)
	}
	wantLog(t, s, log, 0, -1, []string{"e1", "e2"})
	wantValue(t, s, rec, []byte("v2"))
	wantValue(t, s, log+":tail", []byte("2:b"))
}

func testChainStale(t *testing.T, s state.Store) {
	log := chainKey(t, "log")
	link1(t, s, state.Link{Log: log, Prev: "", Tail: "1:a", Entry: []byte("e1"), TTL: long})
	rec := chainKey(t, "rec")
	r := link1(t, s, state.Link{Log: log, Prev: "", Tail: "1:x", Entry: []byte("other"),
		Sets: []state.KV{{Key: rec, Val: []byte("no")}}, TTL: long})
	if r.OK || r.Tail != "1:a" {
		t.Fatalf("stale prev: %+v, want not OK with tail 1:a", r)
	}
	wantLog(t, s, log, 0, -1, []string{"e1"})
	if _, err := s.Get(t.Context(), rec); err != state.ErrNotFound {
		t.Errorf("a refused link wrote its sets: %v", err)
	}
}

func testChainBatch(t *testing.T, s state.Store) {
	a, b := chainKey(t, "a"), "{"+t.Name()+"-b}:b"
	res, err := s.AppendChained(t.Context(), []state.Link{
		{Log: a, Prev: "", Tail: "1:a", Entry: []byte("a1"), TTL: long},
		{Log: b, Prev: "wrong", Tail: "1:b", Entry: []byte("b1"), TTL: long},
		{Log: a, Prev: "1:a", Tail: "2:a", Entry: []byte("a2"), TTL: long},
	})
	must(t, "AppendChained", err)
	if !res[0].OK || res[1].OK || res[1].Tail != "" || !res[2].OK {
		t.Fatalf("batch results %+v", res)
	}
	wantLog(t, s, a, 0, -1, []string{"a1", "a2"})
	wantLog(t, s, b, 0, -1, []string{})
}

func testChainBatchSets(t *testing.T, s state.Store) {
	a, b := chainKey(t, "a"), "{"+t.Name()+"-b}:b"
	recA, cpA, recB := a+":rec", a+":cp", b+":rec"
	res, err := s.AppendChained(t.Context(), []state.Link{
		{Log: a, Prev: "", Tail: "1:a", Entry: []byte("a1"), TTL: long,
			Sets: []state.KV{{Key: recA, Val: []byte("ra1")}, {Key: cpA, Val: []byte("cp")}}},
		{Log: b, Prev: "", Tail: "1:b", Entry: []byte("b1"), Sets: []state.KV{{Key: recB, Val: []byte("rb1")}}},
		{Log: a, Prev: "1:a", Tail: "2:a", Entry: []byte("a2"), TTL: long, Sets: []state.KV{{Key: recA, Val: []byte("ra2")}}},
		{Log: b, Prev: "stale", Tail: "2:b", Entry: []byte("b2"), Sets: []state.KV{{Key: recB, Val: []byte("lost")}}},
	})
	must(t, "AppendChained", err)
	if len(res) != 4 || !res[0].OK || !res[1].OK || !res[2].OK || res[3].OK || res[3].Tail != "1:b" {
		t.Fatalf("batch results %+v", res)
	}
	wantLog(t, s, a, 0, -1, []string{"a1", "a2"})
	wantLog(t, s, b, 0, -1, []string{"b1"})
	for k, want := range map[string]string{recA: "ra2", cpA: "cp", recB: "rb1"} {
		got, err := s.Get(t.Context(), k)
		must(t, "Get "+k, err)
		if string(got) != want {
			t.Fatalf("%s = %q, want %q", k, got, want)
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
			prev, n := "", 0
			for n < each {
				tail := strconv.Itoa(w) + "-" + strconv.Itoa(n)
				r := link1(t, s, state.Link{Log: log, Prev: prev, Tail: tail, Entry: []byte(prev + ">" + tail), TTL: long})
				if r.Err != nil {
					t.Error(r.Err)
					return
				}
				if r.OK {
					prev, n = tail, n+1
				} else {
					prev = r.Tail // someone else linked: build on theirs
				}
			}
		}()
	}
	wg.Wait()
	entries, err := s.Range(t.Context(), log, 0, -1)
	must(t, "Range", err)
	if len(entries) != writers*each {
		t.Fatalf("%d entries, want %d", len(entries), writers*each)
	}
	// Every entry names the previous entry's tail: one unbroken chain.
	prev := ""
	for i, e := range entries {
		p, tail, ok := cut(string(e))
		if !ok || p != prev {
			t.Fatalf("entry %d %q does not follow %q", i, e, prev)
		}
		prev = tail
	}
}

func cut(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '>' {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
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
