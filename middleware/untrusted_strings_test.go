package middleware

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/batonproxy/baton/trust"
)

// stringsOfTree returns what forStrings finds in body decoded as the
// untrusted-content path decoded every body before jsonStrings, as
// "pointer=text" lines, sorted (a map's members come in any order).
func stringsOfTree(t testing.TB, body []byte) ([]string, bool) {
	doc, err := decodeJSON(body)
	if err != nil {
		return nil, false
	}
	var out []string
	forStrings(doc, "", func(ptr, s string) { out = append(out, ptr+"="+s) })
	slices.Sort(out)
	return out, true
}

func pairs(strs []spanText) []string {
	out := make([]string, len(strs))
	for i, s := range strs {
		out[i] = s.ptr + "=" + s.text
	}
	return out
}

func TestJSONStrings(t *testing.T) {
	for _, c := range []struct {
		body string
		want []string // in document order; nil: not read, the caller decodes
	}{
		{`{"task":"x","n":1,"list":["a",{"b/c~d":"e"},true,null,"f"]}`, []string{"/task=x", "/list/0=a", "/list/1/b~1c~0d=e", "/list/4=f"}},
		{`"top"`, []string{"=top"}},
		{` {"a":"\u00e9\n\"q\""} trailing, as the Decoder leaves it`, []string{"/a=é\n\"q\""}},
		{`{"name":"not a value","v":{"name":"value"}}`, []string{"/name=not a value", "/v/name=value"}},
		{`{"a":1}`, []string{}},
		{`{"a":"x","a":"y"}`, nil}, // a duplicate name: encoding/json keeps the last
		{"{\"a\":\"\xff\"}", nil},  // invalid UTF-8: encoding/json replaces it
		{`{"a":"\ud800"}`, nil},    // a lone surrogate: likewise
		{`{"a":`, nil},             // not JSON: the whole body is the text
		{``, nil},
	} {
		got, ok := jsonStrings([]byte(c.body))
		if c.want == nil {
			if ok {
				t.Errorf("%q: read as %q, want it left to encoding/json", c.body, pairs(got))
			}
			continue
		}
		if !ok || !slices.Equal(pairs(got), c.want) {
			t.Errorf("%q: got %q (%v), want %q", c.body, pairs(got), ok, c.want)
		}
	}
}

// TestSpanTextsReadsWholeBodyWithoutTree: a body labelled whole is read
// for its strings without its tree; one labelled in parts, or not JSON, as
// before.
func TestSpanTextsReadsWholeBodyWithoutTree(t *testing.T) {
	body := []byte(`{"task":"summarise","notes":["from the web"]}`)
	in := &Info{Body: body, Buffered: true}
	whole := trust.Labels{Spans: []trust.SpanLabel{{Pointer: "", Sources: []string{"peer:a"}}}}
	d := &inboundDoc{body: body, json: true}
	texts := spanTexts(d, in, whole)
	if d.decoded || !slices.Equal(pairs(texts), []string{"/task=summarise", "/notes/0=from the web"}) || texts[0].sources[0] != "peer:a" {
		t.Fatalf("whole body: decoded %v, texts %q", d.decoded, pairs(texts))
	}
	part := trust.Labels{Spans: []trust.SpanLabel{{Pointer: "/notes", Sources: []string{"https://example.com"}}}}
	d = &inboundDoc{body: body, json: true}
	if texts := spanTexts(d, in, part); !d.decoded || !slices.Equal(pairs(texts), []string{"/notes/0=from the web"}) {
		t.Fatalf("a part: decoded %v, texts %q", d.decoded, pairs(texts))
	}
	bad := []byte(`{"task":`)
	d = &inboundDoc{body: bad, json: true}
	if texts := spanTexts(d, &Info{Body: bad, Buffered: true}, whole); !slices.Equal(pairs(texts), []string{`={"task":`}) {
		t.Fatalf("not JSON: texts %q", pairs(texts))
	}
}

func TestMayCarryMarks(t *testing.T) {
	for body, want := range map[string]bool{
		`{"artifacts":[{"trust":"untrusted","content":"x"}]}`: true,
		`{"artifacts":[{"trust":"\u0075ntrusted"}]}`:          true,
		`{"task":"summarise the page"}`:                       false,
		`{"task":"r\u00e9sum\u00e9 \u2014 \u003cb\u003e"}`:    false, // no escape of a lower-case letter
		`{"task":"UNTRUST\u0045D"}`:                           false, // marks are lower case
		`{"task":"\u0074rusted"}`:                             true,
		`{"task":"\u2014 \u4e2d\u6587"}`:                      false,
	} {
		if got := mayCarryMarks([]byte(body)); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}

// FuzzJSONStrings holds jsonStrings to encoding/json: whatever it reads, the
// Decoder reads too, with the same strings at the same pointers; and a body
// holding a mark (markedSpans finds one) is one mayCarryMarks lets through.
func FuzzJSONStrings(f *testing.F) {
	for _, s := range []string{
		`{"task":"x","n":1.5e3,"list":["a",{"b/c~d":"e"},true,null,"f"]}`,
		`{"jsonrpc":"2.0","params":{"message":{"parts":[{"text":"hi","metadata":{"baton.trust":{"trust":"untrusted","sources":["web"]}}}]}}}`,
		`{"artifacts":[{"trust":"untrusted","source":"https://example.com","content":"page"}]}`,
		`"\ud83d\ude00 \u00e9 \\u \/"`, `[1,"2",[3,"4"]] x`, `{"a":"x","a":"y"}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`,
		`  123  `, `{"":{"":[""]}}`, `{"a":{"b":[]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if doc, err := decodeJSON(body); err == nil && !mayCarryMarks(body) {
			var l trust.Labels
			markedSpans(doc, &l)
			if !l.Empty() {
				t.Fatalf("%q: marked (%s) but mayCarryMarks said no", body, l.String())
			}
		}
		got, ok := jsonStrings(body)
		if !ok {
			return
		}
		want, wok := stringsOfTree(t, body)
		if !wok {
			t.Fatalf("%q: jsonStrings read it, encoding/json did not", body)
		}
		have := pairs(got)
		slices.Sort(have)
		if !slices.Equal(have, want) {
			t.Fatalf("%q:\njsonStrings %s\nencoding/json %s", body, fmt.Sprint(have), strings.Join(want, " "))
		}
	})
}

// BenchmarkSpanTextsWhole is the text of a body labelled whole, read for
// its strings (what the receiving Baton does) and through the decoded tree
// (what it did before, and does for bodies labelled in parts).
func BenchmarkSpanTextsWhole(b *testing.B) {
	for _, c := range []struct{ name, body string }{
		{"512B", `{"task":"` + strings.Repeat("x", 500) + `"}`},
		{"a2a-4KiB", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"` +
			strings.Repeat("the quarterly figures, ", 130) + `"},{"data":{"rows":[1,2,3,true,null],"note":"` + strings.Repeat("y", 900) + `"}}]}}}`},
	} {
		body := []byte(c.body)
		in := &Info{Body: body, Buffered: true}
		whole := trust.Labels{Spans: []trust.SpanLabel{{Pointer: "", Sources: []string{"peer:a"}}}}
		b.Run(c.name+"/strings", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				spanTexts(&inboundDoc{body: body, json: true}, in, whole)
			}
		})
		b.Run(c.name+"/tree", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				spanTexts(&inboundDoc{body: body, json: true, decoded: true, tree: must(decodeJSON(body))}, in, whole)
			}
		})
	}
}

func must(v any, err error) any {
	if err != nil {
		panic(err)
	}
	return v
}
