package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Context shapes what an edge's handoffs carry (docs/context.md): large
// artifacts by reference, a token budget, and which fields travel.
type Context struct {
	// ByReference passes large artifacts by reference on an outbound edge;
	// on an inbound edge it says how referenced content reaches the agent.
	ByReference *ByReference `yaml:"by_reference"`
	// Budget bounds the tokens of an outbound edge's handoffs.
	Budget *Budget `yaml:"budget"`
	// Fields keeps or drops members of an outbound edge's envelopes and A2A
	// messages.
	Fields *Fields `yaml:"fields"`
}

// ByReference configures reference passing. `by_reference: true` takes
// every default.
type ByReference struct {
	// MinBytes: an artifact whose content is at least this many bytes
	// leaves by reference (outbound edges).
	MinBytes int `yaml:"min_bytes"`
	// Deliver is how referenced content reaches the agent (inbound edges):
	// inline (the default: the Baton puts the content back) or reference
	// (the agent reads it from its Baton when it needs it).
	Deliver string `yaml:"deliver"`
}

// UnmarshalYAML takes `true` for every default, or the block.
func (b *ByReference) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var on bool
		if err := n.Decode(&on); err != nil || !on {
			return fmt.Errorf("line %d: by_reference is true or a block (min_bytes, deliver)", n.Line)
		}
		*b = ByReference{}
		return nil
	}
	type plain ByReference
	return n.Decode((*plain)(b))
}

// DefaultRefMinBytes is the artifact size from which content leaves by
// reference when by_reference sets no min_bytes.
const DefaultRefMinBytes = 64 << 10

// How referenced content is delivered to the receiving agent.
const (
	DeliverInline    = "inline"
	DeliverReference = "reference"
)

// Budget bounds the tokens of a handoff's text (docs/context.md).
type Budget struct {
	// MaxTokens is the most tokens the handoff may carry.
	MaxTokens int `yaml:"max_tokens"`
	// Model is the receiving agent's model; it picks the tokenizer
	// (gpt-4o → o200k_base). Tokenizer names one directly. With neither,
	// or a model no tokenizer is known for, tokens are counted as bytes/4.
	Model     string `yaml:"model"`
	Tokenizer string `yaml:"tokenizer"`
	// Over is what an over-budget handoff meets: enforce (refused, the
	// default) or trim (detail dropped by the envelope's priorities).
	Over string `yaml:"over"`
}

// What an over-budget handoff meets.
const (
	BudgetEnforce = "enforce"
	BudgetTrim    = "trim"
)

// Tokenizers are the tokenizer names Budget.Tokenizer takes; bytes/4 is the
// stated estimate.
var Tokenizers = []string{"o200k_base", "cl100k_base", "p50k_base", "r50k_base", "bytes/4"}

// Fields keeps or drops members by JSON pointer (RFC 6901; a `*` token
// matches every member or element at its level).
type Fields struct {
	Envelope FieldPolicy `yaml:"envelope"`
	Message  FieldPolicy `yaml:"message"`
}

// FieldPolicy lists pointers to keep (everything else goes) or to drop.
type FieldPolicy struct {
	Keep []string `yaml:"keep"`
	Drop []string `yaml:"drop"`
}

// ContextOut returns the context block of the outbound edge to peer, or nil.
func (c *Config) ContextOut(peer string) *Context {
	if e, ok := c.OutEdge(peer); ok {
		return e.Context
	}
	return nil
}

// Deliver returns how referenced content arriving from peer reaches the
// agent.
func (c *Config) Deliver(peer string) string {
	if e, ok := c.InEdge(peer); ok && e.Context != nil && e.Context.ByReference != nil && e.Context.ByReference.Deliver != "" {
		return e.Context.ByReference.Deliver
	}
	return DeliverInline
}

func (c *Config) defaultContext() {
	for _, e := range c.Edges {
		x := e.Context
		if x == nil {
			continue
		}
		if r := x.ByReference; r != nil && e.To != "" && r.MinBytes == 0 {
			r.MinBytes = DefaultRefMinBytes
		}
		if b := x.Budget; b != nil && b.Over == "" {
			b.Over = BudgetEnforce
		}
	}
}

func (c *Config) validateContext(bad badFunc) {
	for i, e := range c.Edges {
		x := e.Context
		if x == nil {
			continue
		}
		p := fmt.Sprintf("edges[%d].context", i)
		if r := x.ByReference; r != nil {
			switch {
			case e.To != "" && r.Deliver != "":
				bad(p+".by_reference.deliver", r.Deliver, "is for inbound edges (from): the receiving Baton delivers")
			case e.From != "" && r.MinBytes != 0:
				bad(p+".by_reference.min_bytes", r.MinBytes, "is for outbound edges (to): the sending Baton stores the content")
			case r.MinBytes < 0:
				bad(p+".by_reference.min_bytes", r.MinBytes, "must be 0 or more")
			case r.Deliver != "" && r.Deliver != DeliverInline && r.Deliver != DeliverReference:
				bad(p+".by_reference.deliver", r.Deliver, "must be inline or reference")
			}
			if r.Deliver == DeliverReference && !c.RecordsOn() {
				bad(p+".by_reference.deliver", r.Deliver, "needs records: the trace's records say which agents may read its content (records.enabled)")
			}
		}
		if e.From != "" && (x.Budget != nil || x.Fields != nil) {
			bad(p, nil, "budget and fields are for outbound edges (to): the sending Baton shapes the handoff")
			continue
		}
		if b := x.Budget; b != nil {
			if b.MaxTokens <= 0 {
				bad(p+".budget.max_tokens", b.MaxTokens, "must be a positive number of tokens")
			}
			if b.Over != BudgetEnforce && b.Over != BudgetTrim {
				bad(p+".budget.over", b.Over, "must be enforce or trim")
			}
			if b.Tokenizer != "" && !containsString(Tokenizers, b.Tokenizer) {
				bad(p+".budget.tokenizer", b.Tokenizer, "must be one of "+strings.Join(Tokenizers, ", "))
			}
			if b.Tokenizer != "" && b.Model != "" {
				bad(p+".budget", nil, "sets model or tokenizer, not both")
			}
		}
		if f := x.Fields; f != nil {
			for _, fp := range []struct {
				name string
				pol  FieldPolicy
			}{{"envelope", f.Envelope}, {"message", f.Message}} {
				if len(fp.pol.Keep) > 0 && len(fp.pol.Drop) > 0 {
					bad(p+".fields."+fp.name, nil, "sets keep or drop, not both")
				}
				for j, ptr := range append(append([]string(nil), fp.pol.Keep...), fp.pol.Drop...) {
					if ptr == "" || ptr[0] != '/' {
						bad(fmt.Sprintf("%s.fields.%s[%d]", p, fp.name, j), ptr, "must be a JSON pointer: /member/0/… (* for every member)")
					}
				}
			}
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
