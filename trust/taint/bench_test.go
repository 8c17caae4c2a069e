package taint

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// mixedText returns about n bytes of text like what an agent fetches: prose
// with the leftovers of HTML stripping (navigation, list markers, links,
// numbers, a little non-ASCII).
func mixedText(n int) string {
	g := newProseGen(99)
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		switch i % 6 {
		case 0:
			b.WriteString("Home | News | Sport | Weather | Contact\n\n")
		case 2:
			b.WriteString("  • Résumé tips — “Don’t panic”, read https://example.com/a/b?c=1&d=2 (updated 2024-05-01)\n")
		case 4:
			b.WriteString("Prices: 12.50 € · 9,99 £ · ½ off · naïve café · Größe XL\n")
		}
		b.WriteString(g.paragraph())
		b.WriteString("\n\n")
	}
	return strings.ToValidUTF8(b.String()[:n], "")
}

const benchSize = 64 << 10

func BenchmarkNormalize(b *testing.B) {
	src := []byte(mixedText(benchSize))
	dst := make([]byte, 0, 2*len(src))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		dst = Normalize(dst[:0], src)
	}
}

func BenchmarkSum(b *testing.B) {
	src := []byte(mixedText(benchSize))
	h := NewHasher(Default)
	dst := h.Sum(nil, src)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		dst = h.Sum(dst[:0], src)
	}
	b.ReportMetric(float64(len(dst)), "fingerprints")
}

func BenchmarkScan(b *testing.B) {
	src := []byte(mixedText(benchSize))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if Scan(src).Flagged() {
			b.Fatal("ordinary text flagged")
		}
	}
}

// handoffBody is a JSON handoff of about n bytes: messages and artifacts
// whose texts are prose, some with escapes.
func handoffBody(n int) []byte {
	g := newProseGen(98)
	var artifacts []map[string]any
	size := 0
	for i := 0; size < n; i++ {
		text := g.paragraph()
		if i%3 == 0 {
			text += "\n\n\"Quoted\" <b>markup</b> & tabs\tand é"
		}
		size += len(text) + 80
		artifacts = append(artifacts, map[string]any{
			"id": i, "trust": "untrusted", "source": "https://example.com/page/" + strconv.Itoa(i),
			"parts": []any{map[string]any{"kind": "text", "text": text}},
		})
	}
	body, err := json.Marshal(map[string]any{"task": "summarise", "hop": 2, "artifacts": artifacts})
	if err != nil {
		panic(err)
	}
	return body
}

func BenchmarkSpans(b *testing.B) {
	body := handoffBody(benchSize)
	fn := func(string, []byte) {}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Spans(body, MinText, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTaintField is the per-field work at egress: Sum a field and
// count its matches against the untrusted set of one fetched page.
func BenchmarkTaintField(b *testing.B) {
	h := NewHasher(Default)
	untrusted := Set{}
	untrusted.Add(h.Sum(nil, []byte(mixedText(benchSize)))...)
	field := []byte(newProseGen(97).page())
	var fps []uint64
	b.SetBytes(int64(len(field)))
	b.ReportAllocs()
	for b.Loop() {
		fps = h.Sum(fps[:0], field)
		DefaultThreshold.Tainted(untrusted.Matches(fps), len(fps))
	}
}

// BenchmarkDetect reports the cost per KiB of untrusted text (µs/KiB) for
// prose, JSON tool results, and a base64 blob Detect decodes.
func BenchmarkDetect(b *testing.B) {
	blob := base64.StdEncoding.EncodeToString([]byte(strings.Repeat(mixedText(1024), 64)))
	var tool strings.Builder
	for i := 0; tool.Len() < benchSize; i++ {
		tool.WriteString(`{"id": "evt-` + strconv.Itoa(i) + `", "title": "Quarterly review", "location": "Room 4", "description": "` +
			strings.ReplaceAll(newProseGen(uint64(i)).paragraph(), `"`, `'`) + `", "participants": ["a@example.com", "b@example.com"]}` + "\n")
	}
	for _, bc := range []struct {
		name string
		text []byte
	}{
		{"prose", []byte(mixedText(benchSize))},
		{"tool-json", []byte(tool.String())},
		{"base64", []byte(blob[:benchSize])},
		{"10MiB", []byte(mixedText(10 << 20))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				Detect(bc.text)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/(float64(len(bc.text))/1024), "µs/KiB")
		})
	}
}
