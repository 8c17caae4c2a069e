// Package tokens counts the tokens of a handoff's text the way the
// receiving agent's model will, with OpenAI's byte-pair encodings
// (o200k_base, cl100k_base, p50k_base, p50k_edit, r50k_base), or estimates
// them as bytes/4 where no tokenizer of the model is known.
//
// The encoder is Baton's own, and counts as OpenAI's tiktoken does: text
// is split by the encoding's pattern (github.com/dlclark/regexp2) and each
// piece's bytes are merged by rank; special tokens in the text are text.
// Its vocabularies are embedded compressed (vocab/, 1.8 MB for the
// four), and one is read into memory the first time a text is counted
// with it. They are OpenAI's, published with tiktoken (MIT licence,
// Copyright (c) 2022 OpenAI, Shantanu Jain), and were written out by
// internal/gen from github.com/tiktoken-go/tokenizer (MIT licence,
// Copyright (c) 2023 tiktoken-go), as were the patterns and the model
// names in encodings.go. That library is not linked into Baton: the
// generator and the tests use it. The tests hold every count to tiktoken's
// own (its Rust core, run by node) and compare it with the library's.
package tokens

//go:generate go run ./internal/gen

import (
	"errors"
	"fmt"
	"strings"
)

// Estimate is the name of the bytes/4 estimate.
const Estimate = "bytes/4"

// errUnknown is the error of a tokenizer name no encoding has.
var errUnknown = errors.New("encoding not supported")

// Counter counts tokens for one tokenizer. It is safe for concurrent use.
type Counter struct {
	// Name is the tokenizer's name (o200k_base, …), or Estimate.
	Name string
	// Note says why a model's tokens are estimated, when they are.
	Note string
	enc  *encoding
}

// For returns the counter of a model (gpt-4o, gpt-4.1-mini, o3, gpt-4, …)
// or of a tokenizer named directly (o200k_base, cl100k_base, p50k_base,
// r50k_base, bytes/4). With neither, or a model no tokenizer is known for
// (a Claude, Gemini or Llama model), it estimates, and Note says so. An
// unknown tokenizer name is an error.
func For(model, name string) (*Counter, error) {
	switch {
	case name == Estimate || (name == "" && model == ""):
		return &Counter{Name: Estimate}, nil
	case name != "":
		enc, ok := encodings[name]
		if !ok {
			return nil, fmt.Errorf("tokens: tokenizer %q: %w", name, errUnknown)
		}
		return &Counter{Name: name, enc: enc}, nil
	}
	enc := encodingForModel(strings.ToLower(model))
	if enc == nil {
		return &Counter{Name: Estimate, Note: "no tokenizer is known for model " + model + ": its tokens are estimated as bytes/4"}, nil
	}
	return &Counter{Name: enc.name, enc: enc}, nil
}

// Estimated reports whether the count is the bytes/4 estimate.
func (c *Counter) Estimated() bool { return c.enc == nil }

// Count returns the tokens of text: the tokenizer's count, or bytes/4
// rounded up. The first count with a tokenizer reads its vocabulary
// (tens of milliseconds, a few megabytes that stay); should that or the
// split fail, the text is estimated.
func (c *Counter) Count(text []byte) int {
	if c.enc != nil {
		if n, err := c.enc.count(string(text)); err == nil {
			return n
		}
	}
	return (len(text) + 3) / 4
}
