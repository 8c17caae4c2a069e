package storetest

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/batonproxy/baton/state"
)

func collectionCases() []testCase {
	return []testCase{
		{"append and range", testAppendRange},
		{"range absent log is empty", func(t *testing.T, s state.Store) {
			got, err := s.Range(t.Context(), key(t, "log"), 0, -1)
			must(t, "Range", err)
			if len(got) != 0 {
				t.Fatalf("Range = %q, want empty", got)
			}
		}},
		{"range returns copies", func(t *testing.T, s state.Store) {
			k := key(t, "log")
			for _, v := range []string{"aa", "bb"} {
				_, err := s.Append(t.Context(), k, []byte(v), long)
				must(t, "Append", err)
			}
			got, err := s.Range(t.Context(), k, 0, -1)
			must(t, "Range", err)
			copy(got[0], "XX")
			got[0] = append(got[0], 'Y')
			wantLog(t, s, k, 0, -1, []string{"aa", "bb"})
		}},
		{"index add update range count remove", testIndex},
		{"index incr: counters several Batons add to", testIndexIncr},
		{"append counting: a log entry and counters together", testAppendCounting},
		{"index ties order by member", func(t *testing.T, s state.Store) {
			k := key(t, "idx")
			for _, m := range []string{"d", "b", "c", "a"} {
				must(t, "IndexAdd", s.IndexAdd(t.Context(), k, m, 7, long))
			}
			wantIndex(t, s, k, 7, 7, 0, 0, "a=7 b=7 c=7 d=7")
		}},
		{"index scores keep their value", func(t *testing.T, s state.Store) {
			k := key(t, "idx")
			scores := map[string]float64{"neg": -1.5, "zero": 0, "frac": 2.25, "big": 1e15, "tiny": 1e-9}
			for m, sc := range scores {
				must(t, "IndexAdd", s.IndexAdd(t.Context(), k, m, sc, long))
			}
			wantIndex(t, s, k, math.Inf(-1), math.Inf(1), 0, 0, "neg=-1.5 zero=0 tiny=1e-09 frac=2.25 big=1e+15")
			wantIndex(t, s, k, -1.5, 1e-9, 0, 0, "neg=-1.5 zero=0 tiny=1e-09")
		}},
	}
}

func testAppendRange(t *testing.T, s state.Store) {
	k := key(t, "log")
	for i := range 5 {
		n, err := s.Append(t.Context(), k, fmt.Appendf(nil, "e%d", i), long)
		must(t, "Append", err)
		if n != int64(i+1) {
			t.Fatalf("Append #%d returned length %d, want %d", i, n, i+1)
		}
	}
	tests := []struct {
		name        string
		start, stop int64
		want        []string
	}{
		{"all", 0, -1, []string{"e0", "e1", "e2", "e3", "e4"}},
		{"first", 0, 0, []string{"e0"}},
		{"last", -1, -1, []string{"e4"}},
		{"last two", -2, -1, []string{"e3", "e4"}},
		{"middle", 1, 3, []string{"e1", "e2", "e3"}},
		{"mixed signs", 1, -2, []string{"e1", "e2", "e3"}},
		{"start after stop", 3, 1, nil},
		{"clamped both ends", -100, 100, []string{"e0", "e1", "e2", "e3", "e4"}},
		{"past the end", 5, 10, nil},
		{"before the start", -100, -6, nil},
		{"stop clamped", 2, 100, []string{"e2", "e3", "e4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantLog(t, s, k, tc.start, tc.stop, tc.want)
		})
	}
}

func testIndex(t *testing.T, s state.Store) {
	ctx := t.Context()
	k := key(t, "idx")
	for _, m := range []state.Scored{{Member: "a", Score: 1}, {Member: "b", Score: 2}, {Member: "c", Score: 3}, {Member: "d", Score: 2}} {
		must(t, "IndexAdd", s.IndexAdd(ctx, k, m.Member, m.Score, long))
	}
	must(t, "IndexAdd update", s.IndexAdd(ctx, k, "a", 5, long))
	wantCount(t, s, k, 4)
	inf := math.Inf(1)
	tests := []struct {
		name          string
		min, max      float64
		offset, count int64
		want          string
	}{
		{"all", -inf, inf, 0, 0, "b=2 d=2 c=3 a=5"},
		{"bounds inclusive", 2, 3, 0, 0, "b=2 d=2 c=3"},
		{"offset and count", -inf, inf, 1, 2, "d=2 c=3"},
		{"offset only", -inf, inf, 2, 0, "c=3 a=5"},
		{"negative count is all", -inf, inf, 1, -1, "d=2 c=3 a=5"},
		{"count past end", 3, inf, 0, 10, "c=3 a=5"},
		{"offset past end", -inf, inf, 4, 0, ""},
		{"negative offset is empty", -inf, inf, -1, 0, ""},
		{"min above max", 4, 1, 0, 0, ""},
		{"between members", 3.5, 4.5, 0, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantIndex(t, s, k, tc.min, tc.max, tc.offset, tc.count, tc.want)
		})
	}
	t.Run("remove", func(t *testing.T) {
		// Sequential, so it runs before the parallel range checks above
		// resume; its own key keeps it from disturbing them.
		k := key(t, "idx")
		must(t, "IndexAdd", s.IndexAdd(ctx, k, "x", 1, long))
		must(t, "IndexAdd", s.IndexAdd(ctx, k, "y", 2, long))
		must(t, "IndexRemove", s.IndexRemove(ctx, k, "x"))
		must(t, "IndexRemove absent member", s.IndexRemove(ctx, k, "nope"))
		wantCount(t, s, k, 1)
		wantIndex(t, s, k, -inf, inf, 0, 0, "y=2")
		must(t, "IndexRemove last", s.IndexRemove(ctx, k, "y"))
		wantCount(t, s, k, 0)
		wantIndex(t, s, k, -inf, inf, 0, 0, "")
		must(t, "IndexRemove on absent index", s.IndexRemove(ctx, key(t, "none"), "x"))
		wantCount(t, s, key(t, "none"), 0)
	})
}

// testAppendCounting: the entry lands in the log and the counts in their
// index, each with its TTL, adding to what the index held; a log key that
// holds another kind refuses both.
func testAppendCounting(t *testing.T, s state.Store) {
	ctx := t.Context()
	lk, ik := key(t, "log"), key(t, "counts")
	_, err := s.IndexIncr(ctx, ik, []state.Scored{{Member: "tokens", Score: 10}}, long)
	must(t, "IndexIncr", err)
	for i := range 2 {
		n, err := s.AppendCounting(ctx, lk, fmt.Appendf(nil, "e%d", i), long,
			state.Counts{Key: ik, Deltas: []state.Scored{{Member: "calls", Score: 1}, {Member: "tokens", Score: 100}}, TTL: long})
		must(t, "AppendCounting", err)
		if n != int64(i+1) {
			t.Fatalf("AppendCounting #%d returned length %d, want %d", i, n, i+1)
		}
	}
	wantLog(t, s, lk, 0, -1, []string{"e0", "e1"})
	wantIndex(t, s, ik, math.Inf(-1), math.Inf(1), 0, 0, "calls=2 tokens=210")
	// A key that holds a plain value is not a log.
	vk := key(t, "value")
	must(t, "Set", s.Set(ctx, vk, []byte("v"), long))
	if _, err := s.AppendCounting(ctx, vk, []byte("x"), long, state.Counts{Key: ik, Deltas: []state.Scored{{Member: "calls", Score: 1}}, TTL: long}); err == nil {
		t.Fatal("AppendCounting onto a plain value succeeded")
	}
}

// testIndexIncr: counters in an index add up, from nothing, several at
// once, and a concurrent adder loses nothing.
func testIndexIncr(t *testing.T, s state.Store) {
	ctx := t.Context()
	k := key(t, "incr")
	got, err := s.IndexIncr(ctx, k, []state.Scored{{Member: "tokens", Score: 150}, {Member: "cost", Score: 2500}}, long)
	must(t, "IndexIncr", err)
	if !slices.Equal(got, []float64{150, 2500}) {
		t.Fatalf("IndexIncr from nothing = %v, want [150 2500]", got)
	}
	got, err = s.IndexIncr(ctx, k, []state.Scored{{Member: "tokens", Score: 50}, {Member: "calls", Score: 1}, {Member: "tokens", Score: 1}}, long)
	must(t, "IndexIncr", err)
	if !slices.Equal(got, []float64{200, 1, 201}) {
		t.Fatalf("IndexIncr again = %v, want [200 1 201]", got)
	}
	got, err = s.IndexIncr(ctx, k, nil, long)
	must(t, "IndexIncr of nothing", err)
	if len(got) != 0 {
		t.Fatalf("IndexIncr of nothing = %v", got)
	}
	wantIndex(t, s, k, math.Inf(-1), math.Inf(1), 0, 0, "calls=1 tokens=201 cost=2500")
	if _, err := s.IndexIncr(ctx, k, []state.Scored{{Member: "x", Score: math.NaN()}}, long); err == nil {
		t.Fatal("IndexIncr of NaN succeeded")
	}
	must(t, "Set", s.Set(ctx, key(t, "plain"), []byte("v"), long))
	if _, err := s.IndexIncr(ctx, key(t, "plain"), []state.Scored{{Member: "x", Score: 1}}, long); err == nil {
		t.Fatal("IndexIncr on a plain value succeeded")
	}

	c := key(t, "incr-concurrent")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if _, err := s.IndexIncr(ctx, c, []state.Scored{{Member: "n", Score: 1}, {Member: "m", Score: 2}}, long); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	wantIndex(t, s, c, math.Inf(-1), math.Inf(1), 0, 0, "n=200 m=400")
}

func wantLog(t *testing.T, s state.Store, k string, start, stop int64, want []string) {
	t.Helper()
	got, err := s.Range(t.Context(), k, start, stop)
	must(t, "Range", err)
	var gotS []string
	for _, v := range got {
		gotS = append(gotS, string(v))
	}
	if !slices.Equal(gotS, want) {
		t.Fatalf("Range(%d, %d) = %q, want %q", start, stop, gotS, want)
	}
}

func wantIndex(t *testing.T, s state.Store, k string, min, max float64, offset, count int64, want string) {
	t.Helper()
	got, err := s.IndexRange(t.Context(), k, min, max, offset, count)
	must(t, "IndexRange", err)
	var b []byte
	for i, m := range got {
		if i > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "%s=%g", m.Member, m.Score)
	}
	if string(b) != want {
		t.Fatalf("IndexRange(%g, %g, %d, %d) = %q, want %q", min, max, offset, count, b, want)
	}
}

func wantCount(t *testing.T, s state.Store, k string, want int64) {
	t.Helper()
	n, err := s.IndexCount(t.Context(), k)
	must(t, "IndexCount", err)
	if n != want {
		t.Fatalf("IndexCount = %d, want %d", n, want)
	}
}
