package tokens

import (
	"runtime"
	"slices"
	"testing"
)

// BenchmarkLoad reads each vocabulary, as the first count with it does:
// ns/op is the first use's load time (p50k_base's after r50k_base's, which it
// extends), B/op what it allocates, and retained-B the heap it keeps.
func BenchmarkLoad(b *testing.B) {
	var vocabs []*vocabulary
	for _, e := range encodings {
		if !slices.Contains(vocabs, e.vocab) {
			vocabs = append(vocabs, e.vocab)
		}
	}
	slices.SortFunc(vocabs, func(a, b *vocabulary) int { return a.ranks - b.ranks })
	for _, v := range vocabs {
		b.Run(v.file, func(b *testing.B) {
			b.ReportAllocs()
			var retained uint64
			for b.Loop() {
				var before, after runtime.MemStats
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				var base *table
				if v.base != nil {
					if err := v.base.load(); err != nil {
						b.Fatal(err)
					}
					base = v.base.table
				}
				rank, err := readVocabulary(v.file, v.ranks, base)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				retained = after.HeapAlloc - before.HeapAlloc
				runtime.KeepAlive(rank)
				b.StartTimer()
			}
			b.ReportMetric(float64(retained), "retained-B")
		})
	}
}
