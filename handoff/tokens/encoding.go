package tokens

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// encoding is a byte-pair encoding: text is split into pieces by its
// pattern, and each piece's bytes are merged by its vocabulary's ranks.
type encoding struct {
	name    string
	vocab   *vocabulary
	pattern string
	// special are the encoding's special tokens. A count never treats them
	// as special: "<|endoftext|>" in a handoff's text is text, counted as
	// its plain tokens, as the model's API reads it in a message.
	special map[string]int

	once  sync.Once
	split *regexp2.Regexp
	err   error
}

// modelPrefix gives the encoding of the models whose names begin with it.
type modelPrefix struct{ prefix, encoding string }

// encodingForModel returns the encoding of a model, by its name or by a
// prefix of it, or nil.
func encodingForModel(model string) *encoding {
	if e, ok := models[model]; ok {
		return encodings[e]
	}
	for _, p := range modelPrefixes {
		if strings.HasPrefix(model, p.prefix) {
			return encodings[p.encoding]
		}
	}
	return nil
}

// load compiles the pattern and reads the vocabulary, once.
func (e *encoding) load() error {
	e.once.Do(func() {
		// Compile, not MustCompile: MustCompile takes the engine compiled
		// for the same pattern when one is linked (tiktoken-go/tokenizer's
		// generated code is, in the tests), and counts would then run on
		// other code in the tests than in Baton; that code also skips
		// U+007F, and splits some runs of whitespace unlike tiktoken.
		e.split, e.err = regexp2.Compile(e.pattern, regexp2.None)
		if e.err != nil {
			e.err = fmt.Errorf("tokens: %s: pattern: %w", e.name, e.err)
			return
		}
		e.err = e.vocab.load()
	})
	return e.err
}

// count returns the tokens of text. Invalid UTF-8 is read as the pattern
// reads it: each byte that starts no valid sequence is U+FFFD.
func (e *encoding) count(text string) (int, error) {
	if err := e.load(); err != nil {
		return 0, err
	}
	if !utf8.ValidString(text) {
		text = string([]rune(text))
	}
	pieces, err := e.split.FindAllStringIndex(text, -1)
	if err != nil {
		return 0, fmt.Errorf("tokens: %s: splitting: %w", e.name, err)
	}
	n := 0
	for _, p := range pieces {
		n += e.vocab.merge(text[p[0]:p[1]])
	}
	return n, nil
}
