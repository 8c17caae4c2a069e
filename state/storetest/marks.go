package storetest

import (
	"context"
	"testing"

	"github.com/batonproxy/baton/state"
)

func markCases() []testCase {
	return []testCase{
		{"marks add and lookup", func(t *testing.T, s state.Store) {
			k := key(t, "marks")
			must(t, "MarkAdd", s.MarkAdd(t.Context(), k, []uint64{1, 2, 3}, "page-a", long, 1000))
			must(t, "MarkAdd", s.MarkAdd(t.Context(), k, []uint64{3, 4}, "page-b", long, 1000))
			got, err := s.MarkLookup(t.Context(), k, []uint64{0, 1, 2, 3, 4, 5, 1 << 63})
			must(t, "MarkLookup", err)
			want := []string{"", "page-a", "page-a", "page-b", "page-b", "", ""}
			wantStrings(t, "MarkLookup", got, want)
		}},
		{"marks may hold once added, until they expire", func(t *testing.T, s state.Store) {
			k := key(t, "marks")
			_, isMemory := s.(*state.Memory)
			if s.MarksMayHold(k) == isMemory {
				t.Fatalf("MarksMayHold of an absent set = %v; the memory store knows it is empty, Redis cannot without asking", !isMemory)
			}
			must(t, "MarkAdd", s.MarkAdd(t.Context(), k, []uint64{42}, "v", short, 100))
			if !s.MarksMayHold(k) {
				t.Fatal("MarksMayHold after MarkAdd = false")
			}
			eventually(t, "the mark set to expire", func(ctx context.Context) (bool, error) {
				got, err := s.MarkLookup(ctx, k, []uint64{42})
				return err == nil && got[0] == "", err
			})
			if s.MarksMayHold(k) == isMemory {
				t.Fatalf("MarksMayHold of an expired set = %v", !isMemory)
			}
		}},
		{"marks added in one large call", func(t *testing.T, s state.Store) {
			k := key(t, "marks")
			members := make([]uint64, 2500) // more than one HSET's worth in the Redis script
			for i := range members {
				members[i] = uint64(i)*7919 + 1
			}
			must(t, "MarkAdd", s.MarkAdd(t.Context(), k, members, "big", long, 100_000))
			got, err := s.MarkLookup(t.Context(), k, []uint64{members[0], members[1499], members[2499], 2})
			must(t, "MarkLookup", err)
			wantStrings(t, "MarkLookup", got, []string{"big", "big", "big", ""})
		}},
		{"marks absent set holds nothing", func(t *testing.T, s state.Store) {
			got, err := s.MarkLookup(t.Context(), key(t, "marks"), []uint64{7, 8})
			must(t, "MarkLookup", err)
			wantStrings(t, "MarkLookup", got, []string{"", ""})
			must(t, "MarkAdd of nothing", s.MarkAdd(t.Context(), key(t, "marks"), nil, "x", long, 10))
		}},
		{"marks bounded by generations", func(t *testing.T, s state.Store) {
			k := key(t, "marks")
			const max = 8 // generations of 4
			for i := range uint64(5) {
				must(t, "MarkAdd", s.MarkAdd(t.Context(), k, []uint64{10*i + 1, 10*i + 2, 10*i + 3, 10*i + 4}, "gen", long, max))
			}
			// Five full generations were written: the fifth filled the newer
			// generation, which became the older; the rest are gone.
			must(t, "MarkAdd", s.MarkAdd(t.Context(), k, []uint64{99}, "last", long, max))
			got, err := s.MarkLookup(t.Context(), k, []uint64{1, 21, 34, 41, 44, 99})
			must(t, "MarkLookup", err)
			wantStrings(t, "MarkLookup after rotation", got, []string{"", "", "", "gen", "gen", "last"})
		}},
		{"marks expire", func(t *testing.T, s state.Store) {
			k := key(t, "marks")
			must(t, "MarkAdd", s.MarkAdd(t.Context(), k, []uint64{42}, "v", short, 100))
			eventually(t, "the mark set to expire", func(ctx context.Context) (bool, error) {
				got, err := s.MarkLookup(ctx, k, []uint64{42})
				return err == nil && got[0] == "", err
			})
		}},
	}
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s = %q, want %q", what, got, want)
		}
	}
}
