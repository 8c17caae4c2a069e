package taint

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"only separators", " \t\n.,;!?- ", ""},
		{"case", "Hello WORLD MiXeD", "hello world mixed"},
		{"whitespace runs", "  a \t\t b\n\n\r\nc   ", "a b c"},
		{"punctuation separates", "end.Start,next;one:two", "end start next one two"},
		{"punctuation never joins", "don't stop-gap e-mail", "don t stop gap e mail"},
		{"symbols", "a+b=c & d|e © f™", "a b c d e f tm"},
		{"digits kept", "Version 2.10, 2024-05-01", "version 2 10 2024 05 01"},
		{"curly quotes and dashes", "\u201cQuoted\u201d \u2018single\u2019 en\u2013dash em\u2014dash\u2026", "quoted single en dash em dash"},
		{"fullwidth", "\uff29\uff47\uff4e\uff4f\uff52\uff45\u3000\uff21\uff4c\uff4c\uff01\uff11\uff12", "ignore all 12"},
		{"ligatures", "\ufb01le \ufb02ow o\ufb00er \ufb03ce \ufb04 \u00e6sthetic \u0153uvre stra\u00dfe", "file flow offer ffice ffl aesthetic oeuvre strasse"},
		{"accents precomposed", "Café naïve résumé São Paulo Zürich Ångström Dvořák Łódź", "cafe naive resume sao paulo zurich angstrom dvorak lodz"},
		{"accents combining", "Cafe\u0301 nai\u0308ve", "cafe naive"},
		{"vietnamese", "Tiếng Việt", "tieng viet"},
		{"greek accents", "Καλημέρα ΚΌΣΜΕ", "καλημερα κοσμε"},
		{"zero-width removed without splitting", "ig\u200bno\u200cre\u200d pre\ufeffvious\u2060", "ignore previous"},
		{"bidi removed", "\u202eevil\u202c \u2066text\u2069 \u200fmark\u200e", "evil text mark"},
		{"tag characters removed", "hi\U000E0069\U000E0067dden", "hidden"},
		{"soft hyphen removed", "hy\u00adphen", "hyphen"},
		{"control characters removed", "a\x00b\x07c\x7fd", "abcd"},
		{"invalid UTF-8 separates", "abc\xffdef\xc3(ghi\xed\xa0\x80jkl", "abc def ghi jkl"},
		{"superscripts and circled", "x\u00b2 \u2460\u2461 \u24d0\u24d1", "x 2 1 2 a b"},
		{"fraction", "2\u00bc cups", "2 1 4 cups"},
		{"math alphanumerics", "\U0001d400\U0001d41b\U0001d41c \U0001d7ce", "abc 0"},
		{"squared units", "5\u338f", "5 kg"},
		{"roman numerals", "Chapter\u2163", "chapter iv"},
		{"kelvin and micro", "\u212a \u00b5", "k μ"},
		{"datamark marker separates", "one\u02c6two\u02c6\u02c6three", "one two three"},
		{"non-latin letters kept", "Привет мир 你好 世界 مرحبا", "привет мир 你好 世界 مرحبا"},
		{"non-ascii digits kept", "\u0661\u0662\u0663", "\u0661\u0662\u0663"},
		{"emoji separate", "fire\U0001f525water", "fire water"},
		{"nbsp and ideographic space", "a\u00a0b\u3000c\u2003d", "a b c d"},
		{"final sigma", "ΟΔΟΣ οδος", "οδοσ οδοσ"},
		{"dotted capital I", "\u0130stanbul", "istanbul"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := string(Normalize(nil, []byte(tc.in)))
			if got != tc.want {
				t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestNormalizeAppends(t *testing.T) {
	t.Parallel()
	got := Normalize([]byte("prefix:"), []byte("  Hello, World  "))
	if string(got) != "prefix:hello world" {
		t.Fatalf("got %q", got)
	}
}

func TestNormalizeNoAllocWithCapacity(t *testing.T) {
	src := []byte(mixedText(4096))
	dst := make([]byte, 0, 2*len(src))
	allocs := testing.AllocsPerRun(20, func() {
		dst = Normalize(dst[:0], src)
	})
	if allocs != 0 {
		t.Fatalf("Normalize allocated %.1f times with a large enough dst", allocs)
	}
}

// checkNormalized asserts the invariants of a normalised text: valid UTF-8,
// no leading, trailing or double space, only lower-case letters and digits
// otherwise, and a fixed point of Normalize.
func checkNormalized(t *testing.T, in, out []byte) {
	t.Helper()
	if !utf8.Valid(out) {
		t.Fatalf("Normalize(%q) = %q: invalid UTF-8", in, out)
	}
	if len(out) > 2*len(in) {
		t.Fatalf("Normalize(%q) = %q: longer than 2*len(src)", in, out)
	}
	if bytes.HasPrefix(out, []byte(" ")) || bytes.HasSuffix(out, []byte(" ")) || bytes.Contains(out, []byte("  ")) {
		t.Fatalf("Normalize(%q) = %q: stray spaces", in, out)
	}
	for _, r := range string(out) {
		if r != ' ' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			t.Fatalf("Normalize(%q) = %q: contains %U", in, out, r)
		}
		if unicode.ToLower(r) != r {
			t.Fatalf("Normalize(%q) = %q: contains upper-case %U", in, out, r)
		}
	}
	if again := Normalize(nil, out); !bytes.Equal(again, out) {
		t.Fatalf("Normalize is not idempotent: %q -> %q -> %q", in, out, again)
	}
}

// TestNormalizeEveryRune checks the invariants for every Unicode code point
// on its own and between letters, which covers every table entry and every
// fallback path.
func TestNormalizeEveryRune(t *testing.T) {
	t.Parallel()
	var in, out []byte
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		in = utf8.AppendRune(append(in[:0], 'A'), r)
		in = append(in, 'z')
		out = Normalize(out[:0], in)
		checkNormalized(t, in, out)
		// Each output byte of a rune, plus one separator space before it,
		// fits in twice the rune's bytes; so the output of any text fits in
		// twice its length.
		if one := Normalize(out[:0], in[1:len(in)-1]); len(one) > 0 && len(one)+1 > 2*utf8.RuneLen(r) {
			t.Fatalf("Normalize(%q) = %q: more than twice as long", in[1:len(in)-1], one)
		}
		out = Normalize(out[:0], in[1:len(in)-1])
		checkNormalized(t, in[1:len(in)-1], out)
	}
}

func TestNormalizeIdempotentRandom(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "B", " ", "\t", ".", "é", "E\u0301", "\ufb01", "\uff21", "\u200b", "\u202e", "\xff", "\xc3",
		"ß", "İ", "ǅ", "\u02c6", "¼", "⑴", "9", "\u0661", "Σ", "ς", "К", "\U000E0041", "\u00ad", "\x00", "\U0001d400"}
	var b []byte
	for range 20000 {
		b = b[:0]
		for n := rng.IntN(24); n > 0; n-- {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		checkNormalized(t, b, Normalize(nil, b))
	}
}
