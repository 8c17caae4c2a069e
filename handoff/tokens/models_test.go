package tokens

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// TestModelsAgreeWithLibrary checks the model table against
// tokenizer.ForModel: every model and prefix in it, and names that only a
// prefix or nothing matches.
func TestModelsAgreeWithLibrary(t *testing.T) {
	names := slices.Collect(maps.Keys(models))
	for _, p := range modelPrefixes {
		names = append(names, p.prefix+"2025-01-01", p.prefix)
	}
	names = append(names, "gpt-4o-mini", "gpt-4.1-nano", "chatgpt-4o-latest", "ft:gpt-4o-mini:acme::x1",
		"ft:gpt-3.5-turbo-0613:acme", "gpt-5.1", "gpt2", "claude-sonnet-4", "gemini-2.5-pro", "llama3", "o3-pro", "")
	for _, name := range names {
		want := ""
		if codec, err := tokenizer.ForModel(tokenizer.Model(name)); err == nil {
			want = codec.GetName()
		}
		got := ""
		if e := encodingForModel(name); e != nil {
			got = e.name
		}
		if got != want {
			t.Errorf("model %q: encoding %q, the library's %q", name, got, want)
		}
	}
	for i, p := range modelPrefixes {
		for _, q := range modelPrefixes[i+1:] {
			if strings.HasPrefix(p.prefix, q.prefix) || strings.HasPrefix(q.prefix, p.prefix) {
				t.Errorf("prefixes %q and %q overlap: which applies would depend on order", p.prefix, q.prefix)
			}
		}
	}
}

// TestVocabulariesLoad reads every vocabulary, finds each token's rank by
// its bytes, and checks each encoding's special tokens are not in it.
func TestVocabulariesLoad(t *testing.T) {
	for name, e := range encodings {
		if err := e.load(); err != nil {
			t.Fatal(err)
		}
		v := e.vocab
		if v.tokens < v.ranks-len(e.special) || v.tokens > v.ranks {
			t.Errorf("%s: %d tokens of %d ranks", name, v.tokens, v.ranks)
		}
		for r := range uint32(v.ranks) {
			if tok := v.token(r); tok != "" {
				if got, ok := v.rank(tok); !ok || got != r {
					t.Fatalf("%s: token %q of rank %d found as rank %d (%v)", name, tok, r, got, ok)
				}
			}
		}
		for s := range e.special {
			if _, ok := v.rank(s); ok {
				t.Errorf("%s: special token %q is in the vocabulary", name, s)
			}
		}
	}
}

func TestBrokenVocabularyIsAnError(t *testing.T) {
	if _, err := readVocabulary("vocab/r50k_base.bpe.gz", 50257, nil); err == nil {
		t.Error("a vocabulary of the wrong size was read")
	}
	if _, err := readVocabulary("vocab/p50k_base.bpe.gz", vocabP50kBase.ranks, nil); err == nil {
		t.Error("a vocabulary was read without the vocabulary it extends")
	}
	if _, err := readVocabulary("vocab/none.bpe.gz", 1, nil); err == nil {
		t.Error("a missing vocabulary was read")
	}
}
