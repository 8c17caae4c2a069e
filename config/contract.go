package config

import (
	"fmt"
	"strings"
)

// Contract configures the handoff envelope contract of an edge (see
// docs/envelope.md). The top-level block applies to every edge, in both
// directions; an edge's own block overrides the keys it sets.
type Contract struct {
	// Mode is off, observe (the default: check and report, never refuse)
	// or enforce (refuse a handoff with violations with 422).
	Mode string `yaml:"mode"`
	// Require lists members (top-level names or JSON pointers into the
	// envelope) that must be present beyond the schema's own.
	Require []string `yaml:"require"`
	// MinCompleteness is the lowest completeness accepted, 0 to 1.
	MinCompleteness *float64 `yaml:"min_completeness"`
	// MaxBytes caps the envelope's size; 0 means no cap.
	MaxBytes int `yaml:"max_bytes"`
}

// DefaultContractMode is the mode of an edge that sets none.
const DefaultContractMode = "observe"

func (c Contract) over(o *Contract) Contract {
	if o == nil {
		return c
	}
	if o.Mode != "" {
		c.Mode = o.Mode
	}
	if o.Require != nil {
		c.Require = o.Require
	}
	if o.MinCompleteness != nil {
		c.MinCompleteness = o.MinCompleteness
	}
	if o.MaxBytes != 0 {
		c.MaxBytes = o.MaxBytes
	}
	return c
}

// ContractOut returns the complete contract settings of the outbound edge to
// peer, and ContractIn those of the inbound edge from sender.
func (c *Config) ContractOut(peer string) Contract {
	k := Contract{Mode: DefaultContractMode}.over(&c.Contract)
	if e, ok := c.OutEdge(peer); ok {
		k = k.over(e.Contract)
	}
	return k
}

// ContractIn returns the complete contract settings of the inbound edge from
// sender.
func (c *Config) ContractIn(sender string) Contract {
	k := Contract{Mode: DefaultContractMode}.over(&c.Contract)
	if e, ok := c.InEdge(sender); ok {
		k = k.over(e.Contract)
	}
	return k
}

func validateContract(bad badFunc, path string, k *Contract) {
	if k == nil {
		return
	}
	switch k.Mode {
	case "", "off", "observe", "enforce":
	default:
		bad(path+".mode", k.Mode, "must be off, observe or enforce")
	}
	for i, r := range k.Require {
		if r == "" || (strings.HasPrefix(r, "/") && strings.Contains(r, "~") && !validPointerEscapes(r)) {
			bad(fmt.Sprintf("%s.require[%d]", path, i), r, "must be a member name like open_questions or a JSON pointer like /task/scope")
		}
	}
	if m := k.MinCompleteness; m != nil && (*m < 0 || *m > 1) {
		bad(path+".min_completeness", *m, "must be between 0 and 1, like 0.8")
	}
	if k.MaxBytes < 0 {
		bad(path+".max_bytes", k.MaxBytes, "must be >= 0 (0: no cap)")
	}
}

// validPointerEscapes checks RFC 6901 escapes: "~" only as "~0" or "~1".
func validPointerEscapes(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	return true
}
