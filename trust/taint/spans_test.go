package taint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// collect runs Spans and returns the spans it reported, copied.
func collect(body []byte, minLen int) ([]Span, error) {
	var out []Span
	err := Spans(body, minLen, func(ptr string, text []byte) {
		out = append(out, Span{Pointer: ptr, Text: bytes.Clone(text)})
	})
	return out, err
}

// referenceSpans walks body with encoding/json's tokenizer, which keeps
// document order and repeated keys.
func referenceSpans(body []byte, minLen int) ([]Span, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var out []Span
	var walk func(ptr string) error
	walk = func(ptr string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				for dec.More() {
					k, err := dec.Token()
					if err != nil {
						return err
					}
					key := strings.NewReplacer("~", "~0", "/", "~1").Replace(k.(string))
					if err := walk(ptr + "/" + key); err != nil {
						return err
					}
				}
			case '[':
				for i := 0; dec.More(); i++ {
					if err := walk(ptr + "/" + strconv.Itoa(i)); err != nil {
						return err
					}
				}
			}
			_, err := dec.Token() // the closing delimiter
			return err
		case string:
			if len(v) >= minLen {
				out = append(out, Span{Pointer: ptr, Text: []byte(v)})
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the value: %v", err)
	}
	return out, nil
}

func spansEqual(a, b []Span) bool {
	return slices.EqualFunc(a, b, func(x, y Span) bool {
		return x.Pointer == y.Pointer && bytes.Equal(x.Text, y.Text)
	})
}

func TestSpans(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		minLen int
		want   []Span
	}{
		{"top-level string", `"hello"`, 0, []Span{{"", []byte("hello")}}},
		{"whitespace around", " \t\n\"x\"\r\n ", 0, []Span{{"", []byte("x")}}},
		{"scalars only", `[1, -2.5e+3, true, false, null, 0]`, 0, nil},
		{"nested", `{"a":{"b":["x",{"c":"y"}],"d":"z"},"e":[[["deep"]]]}`, 0, []Span{
			{"/a/b/0", []byte("x")}, {"/a/b/1/c", []byte("y")}, {"/a/d", []byte("z")}, {"/e/0/0/0", []byte("deep")}}},
		{"keys are not spans", `{"a key that is long":1}`, 0, nil},
		{"pointer escaping", `{"a/b":{"m~n":"v","~/":"w"},"":"empty key"}`, 0, []Span{
			{"/a~1b/m~0n", []byte("v")}, {"/a~1b/~0~1", []byte("w")}, {"/", []byte("empty key")}}},
		{"escaped key", `{"\u0061\/b":"v"}`, 0, []Span{{"/a~1b", []byte("v")}}},
		{"escapes", `["a\"b\\c\/d\be\ff\ng\rh\ti"]`, 0, []Span{{"/0", []byte("a\"b\\c/d\be\ff\ng\rh\ti")}}},
		{"unicode escapes", `["\u00e9\u4e16\uD83D\uDE00"]`, 0, []Span{{"/0", []byte("é世😀")}}},
		{"raw unicode", `{"k":"é世😀"}`, 0, []Span{{"/k", []byte("é世😀")}}},
		{"lone surrogates", `["\ud800x", "\udc00", "\ud800\u0041", "\ud800\ud800\udc00"]`, 0, []Span{
			{"/0", []byte("\ufffdx")}, {"/1", []byte("\ufffd")}, {"/2", []byte("\ufffdA")}, {"/3", []byte("\ufffd\U00010000")}}},
		{"invalid UTF-8", "[\"a\xffb\"]", 0, []Span{{"/0", []byte("a\ufffdb")}}},
		{"repeated key", `{"a":"1","a":"2"}`, 0, []Span{{"/a", []byte("1")}, {"/a", []byte("2")}}},
		{"minLen", `{"short":"abc","long":"abcdef","esc":"\u0061\u0062\u0063\u0064"}`, 4, []Span{
			{"/long", []byte("abcdef")}, {"/esc", []byte("abcd")}}},
		{"empty containers", `{"a":{},"b":[],"c":[{}, []]}`, 0, nil},
		{"empty string", `{"a":""}`, 0, []Span{{"/a", []byte("")}}},
		{"empty string under minLen", `{"a":""}`, 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := collect([]byte(tc.body), tc.minLen)
			if err != nil {
				t.Fatalf("Spans: %v", err)
			}
			if !spansEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			ref, err := referenceSpans([]byte(tc.body), tc.minLen)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			if !spansEqual(got, ref) {
				t.Errorf("got %q, encoding/json walk %q", got, ref)
			}
		})
	}
}

func TestSpansInvalid(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		``, ` `, `{`, `}`, `[`, `]`, `[1,]`, `[,1]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{a:1}`, `{"a" 1}`,
		`"abc`, `"a\"`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\nb\"", "\"\x00\"", `tru`, `nul`, `falsy`, `True`,
		`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `NaN`, `[1 2]`, `"a" "b"`, `{} {}`, `[]]`, `'a'`,
		"\ufeff\"bom\"", `["a",`, `{"a":"b"`, `{"a":"b",`,
	} {
		_, err := collect([]byte(body), 0)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Spans(%q) error %v, want a *SyntaxError", body, err)
			continue
		}
		if se.Offset < 0 || se.Offset > len(body) {
			t.Errorf("Spans(%q): offset %d out of range", body, se.Offset)
		}
		if json.Valid([]byte(body)) {
			t.Errorf("test case %q is valid JSON", body)
		}
	}
}

func TestSpansDepth(t *testing.T) {
	t.Parallel()
	nest := func(n int) []byte {
		return []byte(strings.Repeat(`{"a":[`, n/2) + `"x"` + strings.Repeat(`]}`, n/2))
	}
	got, err := collect(nest(MaxDepth), 0)
	if err != nil || len(got) != 1 || len(got[0].Pointer) != MaxDepth/2*4 {
		t.Fatalf("at MaxDepth: %v, %q", err, got)
	}
	if _, err := collect(nest(MaxDepth+2), 0); !errors.Is(err, ErrDepth) {
		t.Fatalf("beyond MaxDepth: %v, want ErrDepth", err)
	}
	if _, err := collect([]byte(strings.Repeat("[", 100000)), 0); !errors.Is(err, ErrDepth) {
		t.Fatalf("100,000 brackets: %v, want ErrDepth", err)
	}
}

// randomJSON writes a random document, choosing among equivalent spellings
// (escapes, whitespace) as it goes.
type randomJSON struct {
	rng *rand.Rand
	b   []byte
}

func (g *randomJSON) space() {
	for range g.rng.IntN(3) {
		g.b = append(g.b, " \t\n\r"[g.rng.IntN(4)])
	}
}

func (g *randomJSON) str() {
	pieces := []string{"a", "Z", "0", " ", "é", "世", "😀", "~", "/", "\"", "\\", "\n", "\x01", "\u2028", "\u200b",
		"\ufffd", "ignore previous", "\U0010FFFF"}
	g.b = append(g.b, '"')
	for range g.rng.IntN(12) {
		p := pieces[g.rng.IntN(len(pieces))]
		for _, r := range p {
			switch {
			case r == '"' || r == '\\':
				g.b = append(g.b, '\\', byte(r))
			case r < 0x20 || g.rng.IntN(5) == 0:
				if r > 0xffff {
					r1, r2 := utf16Pair(r)
					g.b = fmt.Appendf(g.b, `\u%04x\u%04X`, r1, r2)
				} else {
					g.b = fmt.Appendf(g.b, `\u%04x`, r)
				}
			case r == '/' && g.rng.IntN(2) == 0:
				g.b = append(g.b, '\\', '/')
			default:
				g.b = utf8.AppendRune(g.b, r)
			}
		}
		switch g.rng.IntN(20) {
		case 0:
			g.b = append(g.b, `\ud800`...) // a lone surrogate
		case 1:
			g.b = append(g.b, 0xff) // an invalid byte
		}
	}
	g.b = append(g.b, '"')
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + r>>10, 0xdc00 + r&0x3ff
}

func (g *randomJSON) value(depth int) {
	g.space()
	k := g.rng.IntN(10)
	if depth > 6 {
		k = 9
	}
	switch {
	case k < 2:
		g.b = append(g.b, '{')
		for i := range g.rng.IntN(4) {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.space()
			g.str()
			g.space()
			g.b = append(g.b, ':')
			g.value(depth + 1)
		}
		g.space()
		g.b = append(g.b, '}')
	case k < 4:
		g.b = append(g.b, '[')
		for i := range g.rng.IntN(4) {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.value(depth + 1)
		}
		g.space()
		g.b = append(g.b, ']')
	case k < 7:
		g.str()
	default:
		lits := []string{"0", "-1", "3.25", "1e10", "-0.5E-3", "true", "false", "null", "12345678901234567890"}
		g.b = append(g.b, lits[g.rng.IntN(len(lits))]...)
	}
	g.space()
}

func TestSpansAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	g := &randomJSON{rng: rand.New(rand.NewPCG(9, 10))}
	for i := range 3000 {
		g.b = g.b[:0]
		g.value(0)
		body := g.b
		if !json.Valid(body) {
			t.Fatalf("generator wrote invalid JSON: %q", body)
		}
		minLen := i % 4
		got, err := collect(body, minLen)
		if err != nil {
			t.Fatalf("Spans(%q): %v", body, err)
		}
		want, err := referenceSpans(body, minLen)
		if err != nil {
			t.Fatalf("reference(%q): %v", body, err)
		}
		if !spansEqual(got, want) {
			t.Fatalf("Spans(%q) = %q, encoding/json walk %q", body, got, want)
		}
		// Any truncation is invalid (documents here are not bare numbers at
		// the top level, whose prefixes can be valid).
		if len(body) > 1 && body[0] != '-' && (body[0] < '0' || body[0] > '9') {
			cut := g.rng.IntN(len(bytes.TrimRight(body, " \t\r\n")))
			if _, err := collect(body[:cut], minLen); err == nil && !json.Valid(body[:cut]) {
				t.Fatalf("Spans accepted the truncation %q", body[:cut])
			}
		}
	}
}

func TestSpansReentrant(t *testing.T) {
	t.Parallel()
	outer := []byte(`{"inner":"[\"x\",\"y\"]","other":"z"}`)
	var got []string
	err := Spans(outer, 0, func(ptr string, text []byte) {
		got = append(got, ptr)
		if ptr == "/inner" {
			if err := Spans(bytes.Clone(text), 0, func(p string, _ []byte) { got = append(got, "inner"+p) }); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil || fmt.Sprint(got) != "[/inner inner/0 inner/1 /other]" {
		t.Fatalf("got %v, %v", got, err)
	}
}
