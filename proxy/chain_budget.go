package proxy

import (
	"math"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
)

// chainBudgets returns the chain budget of each inbound edge, and whether
// the edge takes one from its callers' header (docs/model-calls.md).
func chainBudgets(c *config.Config) func(from string) (middleware.ChainBudget, bool) {
	type edgeBudget struct {
		b          middleware.ChainBudget
		fromHeader bool
	}
	byFrom := map[string]edgeBudget{}
	for _, e := range c.Edges {
		if b := e.ChainBudget; b != nil && e.From != "" {
			byFrom[e.From] = edgeBudget{middleware.ChainBudget{Tokens: b.Tokens, CostNano: int64(math.Round(b.CostUSD * 1e9))}, b.FromHeader}
		}
	}
	return func(from string) (middleware.ChainBudget, bool) {
		if len(byFrom) == 0 {
			return middleware.ChainBudget{}, false
		}
		e := byFrom[from]
		return e.b, e.fromHeader
	}
}
