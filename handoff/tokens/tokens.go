// Package tokens counts the tokens of a handoff's text the way the
// receiving agent's model will, with OpenAI's byte-pair encodings
// (github.com/tiktoken-go/tokenizer, which embeds their vocabularies), or
// estimates them as bytes/4 where no tokenizer of the model is known.
package tokens

import (
	"fmt"
	"strings"

	"github.com/tiktoken-go/tokenizer"
)

// Estimate is the name of the bytes/4 estimate.
const Estimate = "bytes/4"

// Counter counts tokens for one tokenizer. It is safe for concurrent use.
type Counter struct {
	// Name is the tokenizer's name (o200k_base, …), or Estimate.
	Name string
	// Note says why a model's tokens are estimated, when they are.
	Note  string
	codec tokenizer.Codec
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
		codec, err := tokenizer.Get(tokenizer.Encoding(name))
		if err != nil {
			return nil, fmt.Errorf("tokens: tokenizer %q: %w", name, err)
		}
		return &Counter{Name: name, codec: codec}, nil
	}
	codec, err := tokenizer.ForModel(tokenizer.Model(strings.ToLower(model)))
	if err != nil {
		return &Counter{Name: Estimate, Note: "no tokenizer is known for model " + model + ": its tokens are estimated as bytes/4"}, nil
	}
	return &Counter{Name: codec.GetName(), codec: codec}, nil
}

// Estimated reports whether the count is the bytes/4 estimate.
func (c *Counter) Estimated() bool { return c.codec == nil }

// Count returns the tokens of text: the tokenizer's count, or bytes/4
// rounded up. Text the tokenizer cannot take (invalid UTF-8) is estimated.
func (c *Counter) Count(text []byte) int {
	if c.codec != nil {
		if n, err := c.codec.Count(string(text)); err == nil {
			return n
		}
	}
	return (len(text) + 3) / 4
}
