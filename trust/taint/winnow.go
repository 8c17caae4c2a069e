package taint

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Params are the fingerprinting parameters. Fingerprints are comparable only
// between texts summed with the same Params.
type Params struct {
	// K is the k-gram length in normalised bytes: no copy shorter than K
	// bytes (after normalisation) can match.
	K int
	// W is the winnowing window in k-grams: any copy of at least K+W-1
	// normalised bytes is guaranteed to share a fingerprint with its source.
	W int
}

// Default are the parameters Baton uses: K=44 (about seven words) and W=8,
// so every shared run of at least 51 normalised bytes (eight or nine words)
// is guaranteed a common fingerprint, and a text yields about one
// fingerprint per 4.5 bytes. A shorter K matches more of the stock phrases
// ordinary prose shares ("it is important to note that the"), a longer one
// or a wider window misses copies with a word changed every sentence; the
// package documentation gives the calibration.
var Default = Params{K: 44, W: 8}

// Bounds on Params.
const (
	MaxK = 1024
	MaxW = 1024
	// MinText is the shortest normalised text that yields a fingerprint: a
	// text shorter than K but at least MinText bytes yields one hash of the
	// whole of it, so that a short fetched snippet copied verbatim still
	// matches.
	MinText = 24
)

// Validate reports whether p can be used as given (NewHasher also accepts
// zero fields, which take Default's).
func (p Params) Validate() error {
	var errs []error
	if p.K < 1 || p.K > MaxK {
		errs = append(errs, fmt.Errorf("taint: k must be in [1, %d], got %d", MaxK, p.K))
	}
	if p.W < 1 || p.W > MaxW {
		errs = append(errs, fmt.Errorf("taint: w must be in [1, %d], got %d", MaxW, p.W))
	}
	return errors.Join(errs...)
}

// hashBase is the odd multiplier of the rolling polynomial hash (mod 2^64).
const hashBase = 0x9e3779b97f4a7c15

// shortTweak separates whole-text hashes of short texts from k-gram hashes.
const shortTweak = 0x5851f42d4c957f2d

// mix scrambles a rolling hash so that its low bits, which in a polynomial
// hash mod 2^64 depend only on the last bytes of the k-gram, depend on all of
// them too.
func mix(x uint64) uint64 {
	x ^= x >> 32
	x *= 0xd6e8feb86659fd93
	x ^= x >> 32
	return x
}

// Hasher computes winnowed fingerprints. It keeps scratch buffers between
// calls, so a Hasher reused for texts of similar size does not allocate. It
// is not safe for concurrent use.
type Hasher struct {
	k, w int
	pow  uint64 // hashBase^k, to remove the byte leaving the k-gram
	norm []byte
	sel  []uint64 // minima of successive windows, selSize of them
	cur  []uint64 // the hashes of the current block of W k-grams
	suf  []uint64 // the suffix minima of the previous block, and one more
	seen fpSet
}

// NewHasher returns a Hasher for p. A zero field takes Default's value and a
// field above its maximum (MaxK, MaxW) is lowered to it; config should
// reject such values with Params.Validate first.
func NewHasher(p Params) *Hasher {
	if p.K <= 0 {
		p.K = Default.K
	}
	if p.W <= 0 {
		p.W = Default.W
	}
	p.K = min(p.K, MaxK)
	p.W = min(p.W, MaxW)
	pow := uint64(1)
	for range p.K {
		pow *= hashBase
	}
	return &Hasher{k: p.K, w: p.W, pow: pow, sel: make([]uint64, selSize), cur: make([]uint64, p.W), suf: make([]uint64, p.W+1)}
}

// Params returns the parameters h was made with.
func (h *Hasher) Params() Params { return Params{K: h.k, W: h.w} }

// Sum appends to dst the fingerprints of text and returns dst. It
// normalises text (Normalize), hashes every k-gram of K bytes with a rolling
// polynomial hash, and winnows the hashes (Schleimer, Wilkerson and Aiken,
// "Winnowing: Local Algorithms for Document Fingerprinting", SIGMOD 2003):
// the minimum hash of every window of W consecutive k-grams is selected, and
// each selected value is appended once, in order of first selection. The
// appended fingerprints are distinct (a value already in dst before the call
// may be appended again).
//
// A fingerprint is a hash value, without its position, so which of two equal
// hashes in a window is selected (the tie-break that robust winnowing
// settles) cannot change the result: Sum appends exactly the values robust
// winnowing selects, without tracking positions (see sumReference in the
// tests).
//
// A normalised text shorter than K yields one hash of the whole of it if it
// is at least MinText bytes long, else nothing. Sum is deterministic and the
// same on every platform: fingerprints from different processes compare.
func (h *Hasher) Sum(dst []uint64, text []byte) []uint64 {
	h.norm = Normalize(h.norm[:0], text)
	s := h.norm
	k, w := h.k, h.w
	if len(s) < k {
		if len(s) < MinText {
			return dst
		}
		var x uint64
		for _, c := range s {
			x = x*hashBase + uint64(c)
		}
		return append(dst, mix(x^shortTweak^uint64(len(s))))
	}
	n := len(s) - k + 1 // k-grams

	var x uint64
	for _, c := range s[:k] {
		x = x*hashBase + uint64(c)
	}
	if n <= w {
		// One window: its minimum.
		v := mix(x)
		for i := 1; i < n; i++ {
			x = x*hashBase + uint64(s[i+k-1]) - uint64(s[i-1])*h.pow
			v = min(v, mix(x))
		}
		return append(dst, v)
	}

	// Sliding-window minima by blocks of W k-grams (van Herk; Gil and
	// Werman): the window ending at k-gram p is the suffix of the previous
	// block after p's offset t in its block, and the prefix of the current
	// block up to t. suf holds the suffix minima of the previous block
	// (suf[w], and all of it before the first block ends, is the maximum
	// hash), pre the running minimum of the current block, cur its hashes.
	// The inner loop is branch-free but for block ends and makes no calls:
	// each window's minimum is written to sel, and kept (ns advances) when
	// it differs from the previous window's; sel is added to the set of
	// fingerprints each time it may be full.
	sel := (*[selSize]uint64)(h.sel)
	cur := h.cur[:w]
	suf := h.suf[:w+1]
	for i := range suf {
		suf[i] = math.MaxUint64
	}
	pow := h.pow
	in := s[k-1 : k-1+n] // in[p] enters k-gram p
	out := s[:n]         // out[p-1] leaves it
	v := mix(x)
	cur[0] = v
	pre := v
	for p := 1; p < w; p++ {
		x = x*hashBase + uint64(in[p]) - uint64(out[p-1])*pow
		v = mix(x)
		cur[p] = v
		pre = min(pre, v)
	}
	// The first window is the first block.
	h.seen.reset(2*n/(w+1) + 16)
	h.seen.add(pre)
	dst = append(dst, pre)
	last := pre
	t := w // offset in its block of the k-gram just hashed
	for p := w; p < n; {
		// A chunk of k-grams p..p+len(ins)-1: ins[j] enters k-gram p+j,
		// outs[j] leaves it. Slicing them to one length lets the compiler
		// drop the bounds checks.
		ins := in[p:min(n, p+selSize)]
		outs := out[p-1 : p-1+len(ins)]
		ns := 0
		for j, c := range ins {
			if t == w {
				m := cur[w-1]
				suf[w-1] = m
				for i := w - 2; i >= 0; i-- {
					m = min(m, cur[i])
					suf[i] = m
				}
				t = 0
				pre = math.MaxUint64
			}
			x = x*hashBase + uint64(c) - uint64(outs[j])*pow
			v = mix(x)
			cur[t] = v
			pre = min(pre, v)
			m := min(suf[t+1], pre)
			sel[ns&(selSize-1)] = m
			ns += b2i(m != last)
			last = m
			t++
		}
		p += len(ins)
		dst = h.seen.appendNew(dst, sel[:ns])
	}
	return dst
}

// selSize is the number of window minima Sum collects before adding them to
// the set of fingerprints.
const selSize = 1024

// b2i is 1 for true, compiled to a flag move rather than a branch.
func b2i(b bool) int {
	var i int
	if b {
		i = 1
	}
	return i
}

// fpSet is an open-addressing set of fingerprints, at most half full. A zero
// key marks an empty slot; the fingerprint 0 is tracked apart.
type fpSet struct {
	keys    []uint64
	mask    uint64
	count   int
	hasZero bool
}

// reset empties the set, sized for want entries.
func (s *fpSet) reset(want int) {
	size := max(64, 1<<bits.Len(uint(2*want)))
	if cap(s.keys) < size {
		s.keys = make([]uint64, size)
	}
	s.keys = s.keys[:size]
	clear(s.keys)
	s.mask = uint64(size - 1)
	s.count = 0
	s.hasZero = false
}

// appendNew adds vs to the set and appends to dst those that were absent.
func (s *fpSet) appendNew(dst, vs []uint64) []uint64 {
	for _, v := range vs {
		if s.add(v) {
			dst = append(dst, v)
		}
	}
	return dst
}

// add inserts v and reports whether it was absent.
func (s *fpSet) add(v uint64) bool {
	if v == 0 {
		had := s.hasZero
		s.hasZero = true
		return !had
	}
	for i := v >> 7 & s.mask; ; i = (i + 1) & s.mask {
		switch s.keys[i] {
		case 0:
			s.keys[i] = v
			s.count++
			if 2*s.count > len(s.keys) {
				s.grow()
			}
			return true
		case v:
			return false
		}
	}
}

// grow doubles the table; a text with far more distinct window minima than
// expected (about 2/(W+1) per byte) needs it.
func (s *fpSet) grow() {
	old := s.keys
	s.keys = make([]uint64, 2*len(old))
	s.mask = uint64(len(s.keys) - 1)
	for _, v := range old {
		if v == 0 {
			continue
		}
		i := v >> 7 & s.mask
		for s.keys[i] != 0 {
			i = (i + 1) & s.mask
		}
		s.keys[i] = v
	}
}

// Set is a set of fingerprints, such as those of every untrusted text a
// Baton has seen in a trace. The zero value is not usable; make one with
// make(Set).
type Set map[uint64]struct{}

// Add adds fingerprints to s.
func (s Set) Add(fps ...uint64) {
	for _, v := range fps {
		s[v] = struct{}{}
	}
}

// Matches returns how many of fps are in s.
func (s Set) Matches(fps []uint64) int {
	n := 0
	for _, v := range fps {
		if _, ok := s[v]; ok {
			n++
		}
	}
	return n
}

// Threshold decides when an outbound field counts as copied untrusted text.
type Threshold struct {
	// MinMatches fingerprints in the untrusted set taint a field whatever
	// its length.
	MinMatches int
	// MinFraction of a field's fingerprints in the untrusted set taint it
	// when it has fewer than MinMatches matches: a short field mostly
	// copied.
	MinFraction float64
}

// DefaultThreshold is calibrated with Default (see the package
// documentation): six matching fingerprints, or half of a field's.
var DefaultThreshold = Threshold{MinMatches: 6, MinFraction: 0.5}

// Tainted reports whether a field with total fingerprints, matched of which
// are in the untrusted set, counts as copied untrusted text.
func (t Threshold) Tainted(matched, total int) bool {
	if matched <= 0 || total <= 0 {
		return false
	}
	if t.MinMatches > 0 && matched >= t.MinMatches {
		return true
	}
	return t.MinFraction > 0 && float64(matched) >= t.MinFraction*float64(total)
}
