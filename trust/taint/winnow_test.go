package taint

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// sumReference is robust winnowing as the paper states it, with positions:
// every k-gram hashed from scratch, then for each window the minimum hash,
// the previous window's selection kept on a tie if still in the window,
// else the rightmost minimum; the selected values, each once, in order of
// first selection.
func sumReference(p Params, text []byte) []uint64 {
	s := Normalize(nil, text)
	if len(s) < p.K {
		if len(s) < MinText {
			return nil
		}
		var x uint64
		for _, c := range s {
			x = x*hashBase + uint64(c)
		}
		return []uint64{mix(x ^ shortTweak ^ uint64(len(s)))}
	}
	hashes := make([]uint64, len(s)-p.K+1)
	for i := range hashes {
		var x uint64
		for _, c := range s[i : i+p.K] {
			x = x*hashBase + uint64(c)
		}
		hashes[i] = mix(x)
	}
	w := min(p.W, len(hashes))
	var out []uint64
	seen := map[uint64]bool{}
	sel := -1
	for start := 0; start+w <= len(hashes); start++ {
		win := hashes[start : start+w]
		minv := slices.Min(win)
		if sel >= start && hashes[sel] == minv {
			continue // robust: keep the previous selection
		}
		for j := start + w - 1; j >= start; j-- {
			if hashes[j] == minv {
				sel = j
				break
			}
		}
		if !seen[minv] {
			seen[minv] = true
			out = append(out, minv)
		}
	}
	return out
}

func TestSumMatchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	g := newProseGen(5)
	texts := []string{"", "short", strings.Repeat("a", 23), strings.Repeat("a", 24), strings.Repeat("ab ", 200),
		strings.Repeat("x", 1000), g.paragraph(), g.page(), mixedText(5000)}
	for range 200 {
		// Low-entropy texts make ties, which is where tie-breaking shows.
		alphabet := "ab "[:1+rng.IntN(3)]
		b := make([]byte, rng.IntN(400))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		texts = append(texts, string(b))
	}
	for _, p := range []Params{Default, {K: 1, W: 1}, {K: 3, W: 2}, {K: 5, W: 4}, {K: 44, W: 1}, {K: 8, W: 100}, {K: 32, W: 16}} {
		h := NewHasher(p)
		for _, text := range texts {
			got := h.Sum(nil, []byte(text))
			want := sumReference(p, []byte(text))
			if !slices.Equal(got, want) {
				t.Fatalf("%+v: Sum(%.60q) = %d fingerprints, reference %d", p, text, len(got), len(want))
			}
		}
	}
}

func TestSumShortText(t *testing.T) {
	t.Parallel()
	h := NewHasher(Default)
	if got := h.Sum(nil, []byte("Too short to count.")); len(got) != 0 {
		t.Errorf("a 17-byte text yielded %d fingerprints", len(got))
	}
	a := h.Sum(nil, []byte("A short snippet, copied whole!"))
	b := h.Sum(nil, []byte("a SHORT snippet copied   whole"))
	if len(a) != 1 || !slices.Equal(a, b) {
		t.Errorf("short texts equal after normalisation: %x and %x", a, b)
	}
	c := h.Sum(nil, []byte("A short snippet, copied whole?!"+" and more words"))
	if slices.Equal(a, c) {
		t.Errorf("different short texts share their hash")
	}
}

func TestSumDeterministicAndDistinct(t *testing.T) {
	t.Parallel()
	text := []byte(mixedText(20000) + mixedText(20000)) // repeated content
	h1, h2 := NewHasher(Default), NewHasher(Default)
	a := h1.Sum(nil, text)
	h1.Sum(nil, []byte(mixedText(100))) // scratch reuse must not matter
	b := h1.Sum(nil, text)
	c := h2.Sum([]uint64{42}, text)
	if !slices.Equal(a, b) || !slices.Equal(a, c[1:]) || c[0] != 42 {
		t.Fatalf("Sum is not deterministic or does not append")
	}
	seen := map[uint64]bool{}
	for _, v := range a {
		if seen[v] {
			t.Fatalf("fingerprint %x appended twice", v)
		}
		seen[v] = true
	}
	// Density is about 2/(W+1) per k-gram; the text repeats itself, so its
	// distinct fingerprints are about half that.
	if perByte := float64(len(a)) / float64(len(Normalize(nil, text))); perByte < 0.05 || perByte > 0.2 {
		t.Errorf("%.3f fingerprints per byte", perByte)
	}
}

// TestSumGuarantee checks winnowing's guarantee: texts sharing a run of at
// least K+W-1 normalised bytes share a fingerprint.
func TestSumGuarantee(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	g := newProseGen(8)
	h := NewHasher(Default)
	span := Default.K + Default.W - 1
	for range 500 {
		shared := []byte(g.paragraph())
		shared = Normalize(nil, shared)
		off := rng.IntN(len(shared) - span)
		for shared[off] == ' ' || shared[off+span-1] == ' ' {
			off = rng.IntN(len(shared) - span)
		}
		run := shared[off : off+span]
		a := h.Sum(nil, []byte(g.paragraph()+" "+string(run)+" "+g.paragraph()))
		b := h.Sum(nil, []byte(strings.ToUpper(string(run))+"! "+g.paragraph()))
		set := Set{}
		set.Add(a...)
		if set.Matches(b) == 0 {
			t.Fatalf("no common fingerprint for the shared run %q", run)
		}
	}
}

func TestSumNoAllocReused(t *testing.T) {
	text := []byte(mixedText(benchSize))
	h := NewHasher(Default)
	dst := h.Sum(nil, text)
	allocs := testing.AllocsPerRun(10, func() {
		dst = h.Sum(dst[:0], text)
	})
	if allocs != 0 {
		t.Fatalf("Sum with a reused Hasher and dst allocated %.1f times", allocs)
	}
}

func TestParams(t *testing.T) {
	t.Parallel()
	if err := Default.Validate(); err != nil {
		t.Fatalf("Default: %v", err)
	}
	for _, p := range []Params{{K: 0, W: 8}, {K: 44, W: 0}, {K: -1, W: -1}, {K: MaxK + 1, W: 8}, {K: 44, W: MaxW + 1}} {
		if p.Validate() == nil {
			t.Errorf("%+v validated", p)
		}
	}
	if got := NewHasher(Params{}).Params(); got != Default {
		t.Errorf("zero Params became %+v, want Default", got)
	}
	if got := NewHasher(Params{K: 5000, W: 5000}).Params(); got != (Params{K: MaxK, W: MaxW}) {
		t.Errorf("oversized Params became %+v", got)
	}
}

func TestThreshold(t *testing.T) {
	t.Parallel()
	th := Threshold{MinMatches: 6, MinFraction: 0.5}
	tests := []struct {
		name           string
		matched, total int
		want           bool
	}{
		{"nothing", 0, 0, false},
		{"no match", 0, 40, false},
		{"few in a long field", 5, 400, false},
		{"enough in a long field", 6, 400, true},
		{"half of a short field", 2, 4, true},
		{"under half of a short field", 2, 5, false},
		{"the one fingerprint of a tiny field", 1, 1, true},
		{"bogus matched > total", 3, 2, true},
		{"negative", -1, 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := th.Tainted(tc.matched, tc.total); got != tc.want {
				t.Errorf("Tainted(%d, %d) = %v, want %v", tc.matched, tc.total, got, tc.want)
			}
		})
	}
	if (Threshold{MinMatches: 0, MinFraction: 0}).Tainted(100, 100) {
		t.Error("a zero Threshold taints")
	}
}

func TestSet(t *testing.T) {
	t.Parallel()
	s := Set{}
	s.Add(1, 2, 3)
	s.Add([]uint64{3, 4}...)
	if got := s.Matches([]uint64{0, 2, 4, 5, 4}); got != 3 {
		t.Errorf("Matches = %d, want 3", got)
	}
}

func TestFpSetZeroAndCollisions(t *testing.T) {
	t.Parallel()
	var s fpSet
	s.reset(4)
	// Values that land in the same slot, and zero.
	vals := []uint64{0, 1 << 7, 1 << 20, 1<<7 | 1<<40, 0, 1 << 7}
	want := []bool{true, true, true, true, false, false}
	for i, v := range vals {
		if got := s.add(v); got != want[i] {
			t.Errorf("add(%x) = %v, want %v", v, got, want[i])
		}
	}
	s.reset(4)
	if !s.add(0) || !s.add(1<<7) {
		t.Error("reset did not empty the set")
	}
}

func TestFpSetGrows(t *testing.T) {
	t.Parallel()
	var s fpSet
	s.reset(1)
	rng := rand.New(rand.NewPCG(1, 1))
	vals := make([]uint64, 5000)
	for i := range vals {
		vals[i] = rng.Uint64()
		if !s.add(vals[i]) {
			t.Fatalf("fresh value %x reported present", vals[i])
		}
	}
	for _, v := range vals {
		if s.add(v) {
			t.Fatalf("value %x lost when the set grew", v)
		}
	}
	if 2*s.count > len(s.keys) {
		t.Fatalf("%d entries in %d slots", s.count, len(s.keys))
	}
}
