package taint

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

//go:generate go run gen_fold.go

// Byte classes in byteFold; any other value is the byte to emit.
const (
	byteSep  = 0 // a separator: ASCII punctuation, symbols, whitespace
	byteDrop = 1 // removed without separating: ASCII control characters
	byteHigh = 2 // the first byte of a multi-byte (or invalid) sequence
)

// byteFold maps each ASCII byte to its lower-case letter or digit, or to
// byteSep or byteDrop; every other byte to byteHigh.
var byteFold = func() (t [256]byte) {
	for c := range t {
		switch {
		case c >= utf8.RuneSelf:
			t[c] = byteHigh
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			t[c] = byte(c)
		case c >= 'A' && c <= 'Z':
			t[c] = byte(c) + 'a' - 'A'
		case c == '\t', c == '\n', c == '\v', c == '\f', c == '\r', c == ' ':
			t[c] = byteSep
		case c < ' ', c == 0x7f:
			t[c] = byteDrop
		default:
			t[c] = byteSep
		}
	}
	return t
}()

// Normalize appends to dst the normalised form of src, UTF-8 text: the form
// fingerprints are taken of, so that copies that differ only in case,
// spacing, punctuation, compatibility forms or invisible characters compare
// equal.
//
//   - Compatibility forms fold to what they stand for: fullwidth letters,
//     ligatures (ﬁ → fi, æ → ae, ß → ss), superscripts, mathematical
//     alphanumerics, enclosed and squared letters; accented Latin, Greek and
//     Cyrillic letters fold to their base letter, and combining marks are
//     dropped. The table is NFKD restricted to those cases (see gen_fold.go).
//   - Letters are lower-cased; letters and digits are kept.
//   - Every other character (punctuation, symbols, whitespace, invalid UTF-8
//     bytes, the datamarking Marker) separates words; a run of separators
//     becomes one space, with none at either end.
//   - Format and control characters (zero-width, bidi controls, soft hyphen,
//     tag characters, variation selectors) are removed without separating,
//     so a word split by one still reads as one word.
//
// The result is valid UTF-8, never longer than 2*len(src), and
// Normalize(Normalize(x)) == Normalize(x). Normalize does not allocate when
// cap(dst)-len(dst) >= 2*len(src).
func Normalize(dst, src []byte) []byte {
	start := len(dst)
	if cap(dst)-start < 2*len(src) {
		dst = slices.Grow(dst, 2*len(src))
	}
	out := dst[:cap(dst)]
	w := start
	// sep is 1 when a separator is pending and something was written
	// (wrote is 1): the next kept character is preceded by one space.
	sep, wrote := 0, 0
	for i := 0; i < len(src); {
		f := byteFold[src[i]]
		if f > byteHigh {
			// A run of ASCII letters and digits: the common case.
			if sep != 0 {
				out[w] = ' '
				w++
				sep = 0
			}
			wrote = 1
			for {
				out[w] = f
				w++
				i++
				if i == len(src) {
					return out[:w]
				}
				if f = byteFold[src[i]]; f <= byteHigh {
					break
				}
			}
		}
		switch f {
		case byteSep:
			sep = wrote
			i++
			continue
		case byteDrop:
			i++
			continue
		}
		r, n := utf8.DecodeRune(src[i:])
		i += n
		if r == utf8.RuneError && n == 1 {
			sep = wrote
			continue
		}
		if k := foldIndex(r); k >= 0 {
			e := foldEntries[k]
			f := foldData[e>>8 : e>>8+e&0xff]
			for j := 0; j < len(f); j++ {
				if f[j] == ' ' {
					sep = wrote
					continue
				}
				if sep != 0 {
					out[w] = ' '
					w++
					sep = 0
				}
				out[w] = f[j]
				w++
				wrote = 1
			}
			continue
		}
		switch {
		case unicode.IsSpace(r):
			sep = wrote
			continue
		case dropped(r):
			continue
		case unicode.IsLetter(r):
			r = unicode.ToLower(r)
		case unicode.IsDigit(r):
		default:
			sep = wrote
			continue
		}
		if sep != 0 {
			out[w] = ' '
			w++
			sep = 0
		}
		w += utf8.EncodeRune(out[w:], r)
		wrote = 1
	}
	return out[:w]
}

// dropped reports whether Normalize removes r without separating words:
// combining marks, format characters (zero-width, bidi, tags) and controls.
func dropped(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc, unicode.Cf, unicode.Cc)
}

// foldIndex returns the index of r in foldRunes, or -1.
func foldIndex(r rune) int {
	if r < foldRunes[0] || r > foldRunes[len(foldRunes)-1] {
		return -1
	}
	lo, hi := 0, len(foldRunes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if foldRunes[m] < r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(foldRunes) && foldRunes[lo] == r {
		return lo
	}
	return -1
}
