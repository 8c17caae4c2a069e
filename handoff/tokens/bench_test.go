package tokens_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/batonproxy/baton/handoff/tokens"
	"github.com/tiktoken-go/tokenizer"
)

// benchText is size bytes of a handoff's kind of text: the repository's
// docs (prose, YAML, JSON, code), cut at size.
func benchText(b *testing.B, size int) []byte {
	b.Helper()
	var text []byte
	for _, f := range []string{"../../docs/context.md", "../../docs/envelope.md", "../../docs/config.md", "../../README.md"} {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		text = append(text, d...)
	}
	for len(text) < size {
		text = append(text, text...)
	}
	return text[:size]
}

// BenchmarkCount counts 2 KiB and 64 KiB of text with Baton's encoder and
// with github.com/tiktoken-go/tokenizer, each vocabulary already loaded.
func BenchmarkCount(b *testing.B) {
	for _, size := range []int{2 << 10, 64 << 10} {
		text := benchText(b, size)
		for _, name := range []string{"o200k_base", "cl100k_base"} {
			ours, err := tokens.For("", name)
			if err != nil {
				b.Fatal(err)
			}
			lib, err := tokenizer.Get(tokenizer.Encoding(name))
			if err != nil {
				b.Fatal(err)
			}
			ours.Count(text)
			b.Run(fmt.Sprintf("%dKiB/%s/baton", size>>10, name), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					ours.Count(text)
				}
			})
			b.Run(fmt.Sprintf("%dKiB/%s/library", size>>10, name), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					lib.Count(string(text))
				}
			})
		}
	}
}
