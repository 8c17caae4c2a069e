package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/batonproxy/baton/state"
)

func concurrencyCases() []testCase {
	return []testCase{
		{"concurrent claims have one winner", testClaimRace},
		{"concurrent appends all land", testAppendRace},
		{"swap is a correct compare-and-set", testSwapCounter},
	}
}

// testClaimRace has 64 goroutines claim one key: exactly one wins, and every
// loser is told the winner's value.
func testClaimRace(t *testing.T, s state.Store) {
	const n = 64
	k := key(t, "k")
	type result struct {
		ok  bool
		cur []byte
		err error
	}
	results := make([]result, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			start.Wait()
			ok, cur, err := s.Claim(t.Context(), k, fmt.Appendf(nil, "g%d", i), long)
			results[i] = result{ok, cur, err}
		})
	}
	start.Done()
	done.Wait()
	winner := -1
	for i, r := range results {
		must(t, "Claim", r.err)
		if r.ok {
			if winner >= 0 {
				t.Fatalf("goroutines %d and %d both claimed the key", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no goroutine claimed the key")
	}
	want := fmt.Appendf(nil, "g%d", winner)
	for i, r := range results {
		if !r.ok && !bytes.Equal(r.cur, want) {
			t.Errorf("loser %d got cur %q, want the winner's %q", i, r.cur, want)
		}
	}
	wantValue(t, s, k, want)
}

// testAppendRace appends from several goroutines at once and expects every
// entry exactly once.
func testAppendRace(t *testing.T, s state.Store) {
	const writers, each = 8, 25
	k := key(t, "log")
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := s.Append(t.Context(), k, fmt.Appendf(nil, "%d-%d", w, i), long); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, "Append", err)
	}
	got, err := s.Range(t.Context(), k, 0, -1)
	must(t, "Range", err)
	var want, have []string
	for w := range writers {
		for i := range each {
			want = append(want, fmt.Sprintf("%d-%d", w, i))
		}
	}
	for _, v := range got {
		have = append(have, string(v))
	}
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Fatalf("log holds %d entries, want each of %d exactly once", len(have), len(want))
	}
}

// testSwapCounter increments a counter from several goroutines with
// read-then-Swap loops; a lost update would leave it short.
func testSwapCounter(t *testing.T, s state.Store) {
	const workers, each = 8, 15
	k := key(t, "counter")
	must(t, "Set", s.Set(t.Context(), k, []byte("0"), long))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range each {
				if err := increment(t.Context(), s, k); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, "increment", err)
	}
	wantValue(t, s, k, strconv.AppendInt(nil, workers*each, 10))
}

func increment(ctx context.Context, s state.Store, k string) error {
	for {
		cur, err := s.Get(ctx, k)
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(string(cur), 10, 64)
		if err != nil {
			return err
		}
		ok, err := s.Swap(ctx, k, cur, strconv.AppendInt(nil, n+1, 10), long)
		if err != nil || ok {
			return err
		}
	}
}
