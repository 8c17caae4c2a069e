package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Models is what Baton makes of the agent's calls to model APIs
// (docs/model-calls.md): which destinations serve one and in which API,
// what their tokens cost, and how many calls one handling may make. The
// chain budgets that bound a request's spend across its agents are set
// where chains enter, on inbound edges (Edge.ChainBudget).
type Models struct {
	// Hosts names external hosts, written as in external.allow (host:port,
	// a leading "*." for any subdomain), that serve a model API, with the
	// API they speak (ModelAPIs). The providers' public hosts need no
	// entry, nor do routes named for a preset; a route of another name
	// says its own (external.routes[].api).
	Hosts map[string]string `yaml:"hosts"`
	// Prices add to, or replace, the shipped price table: USD per million
	// tokens, by model name (a dated snapshot of a listed model takes its
	// price).
	Prices map[string]Price `yaml:"prices"`
	// MaxCallsPerHandling is how many model calls the agent may make while
	// it handles one inbound handoff before Baton answers the next itself
	// with the provider's error (a loop breaker). Absent: the default; 0:
	// no limit.
	MaxCallsPerHandling *int `yaml:"max_calls_per_handling"`
	// OnStoreError is what a model call of a chain with a budget does when
	// the chain's count cannot be read from the store: allow (the default:
	// the call goes out, and is counted when the store answers again) or
	// deny.
	OnStoreError string `yaml:"on_store_error"`
}

// Price is what a model's tokens cost, in USD per million tokens.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
	// CachedInput is the price of input read from the provider's prompt
	// cache; absent: Input.
	CachedInput *float64 `yaml:"cached_input"`
	// CacheWrite is the price of input written to the prompt cache
	// (Anthropic); absent: Input.
	CacheWrite *float64 `yaml:"cache_write"`
}

// ChainBudget bounds what one request costs across its chain of agents,
// in model tokens and in money: set on the inbound edge where chains
// enter, carried along the chain in Baton-Chain-Budget, and checked by
// every Baton before each model call against the chain's count in the
// store (docs/model-calls.md#chain-budgets).
type ChainBudget struct {
	// Tokens bounds the chain's model tokens (input and output); 0: none.
	Tokens int64 `yaml:"tokens"`
	// CostUSD bounds the chain's model spend; 0: none.
	CostUSD float64 `yaml:"cost_usd"`
	// FromHeader takes a budget from the Baton-Chain-Budget header of a
	// caller that runs no Baton, on a callers edge whose credential it
	// presented: the smaller of it and the edge's own wins. Without it the
	// header is ignored (and the receipt says so).
	FromHeader bool `yaml:"from_header"`
}

// ModelAPIs are the APIs Baton understands, by the names config uses.
var ModelAPIs = []string{"anthropic", "azure-openai", "gemini", "openai"}

// Model call defaults and bounds.
const (
	DefaultMaxCallsPerHandling = 200
	// MaxPricePerMTok is the highest price per million tokens accepted: a
	// larger one is a mistake of units.
	MaxPricePerMTok = 10_000.0
	// MaxChainTokens and MaxChainCostUSD bound a chain budget.
	MaxChainTokens  = 1_000_000_000_000
	MaxChainCostUSD = 1_000_000.0
	ModelsAllow     = "allow"
	ModelsDeny      = "deny"
)

// CallsPerHandling returns models.max_calls_per_handling, defaulted (0:
// no limit).
func (m Models) CallsPerHandling() int {
	if m.MaxCallsPerHandling == nil {
		return DefaultMaxCallsPerHandling
	}
	return *m.MaxCallsPerHandling
}

// Set reports whether the budget bounds anything.
func (b *ChainBudget) Set() bool { return b != nil && (b.Tokens > 0 || b.CostUSD > 0) }

// APIOf returns the model API a route speaks: its own api, else its
// preset's name when it is one of ModelAPIs, else "".
func (r Route) APIOf() string {
	if r.API != "" {
		return r.API
	}
	if slices.Contains(ModelAPIs, r.Name) {
		return r.Name
	}
	return ""
}

func (c *Config) validateModels(bad badFunc) {
	m := &c.Models
	for _, h := range slices.Sorted(maps.Keys(m.Hosts)) {
		path := "models.hosts." + h
		if err := checkAllow(h); err != nil {
			bad(path, nil, err.Error())
		} else if !hostAllowed(c.External.Allowed(), h) {
			bad(path, nil, "must be a destination the agent may reach: list it in external.allow")
		}
		if api := m.Hosts[h]; !slices.Contains(ModelAPIs, api) {
			bad(path, api, "must be one of "+strings.Join(ModelAPIs, ", ")+" (openai for any OpenAI-compatible server)")
		}
	}
	for i, r := range c.External.Routes {
		if r.API != "" && !slices.Contains(ModelAPIs, r.API) {
			bad(fmt.Sprintf("external.routes[%d].api", i), r.API, "must be one of "+strings.Join(ModelAPIs, ", ")+
				" (openai for any OpenAI-compatible server)")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.Prices)) {
		p := m.Prices[name]
		path := "models.prices." + name
		if strings.TrimSpace(name) == "" {
			bad("models.prices", name, "must name models, like gpt-4.1-mini")
			continue
		}
		check := func(field string, v float64) {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > MaxPricePerMTok {
				bad(path+"."+field, v, fmt.Sprintf("must be USD per million tokens, between 0 and %g", MaxPricePerMTok))
			}
		}
		check("input", p.Input)
		check("output", p.Output)
		if p.CachedInput != nil {
			check("cached_input", *p.CachedInput)
		}
		if p.CacheWrite != nil {
			check("cache_write", *p.CacheWrite)
		}
	}
	if n := m.MaxCallsPerHandling; n != nil && *n < 0 {
		bad("models.max_calls_per_handling", *n, "must be >= 0 (0: no limit)")
	}
	switch m.OnStoreError {
	case "", ModelsAllow, ModelsDeny:
	default:
		bad("models.on_store_error", m.OnStoreError, "must be allow or deny")
	}
	for i, e := range c.Edges {
		b := e.ChainBudget
		if b == nil {
			continue
		}
		path := fmt.Sprintf("edges[%d].chain_budget", i)
		if e.To != "" {
			bad(path, nil, "applies to inbound edges (from) only: a chain's budget is set where it enters")
			continue
		}
		if b.Tokens < 0 || b.Tokens > MaxChainTokens {
			bad(path+".tokens", b.Tokens, fmt.Sprintf("must be between 0 and %d (0: no token budget)", int64(MaxChainTokens)))
		}
		if math.IsNaN(b.CostUSD) || b.CostUSD < 0 || b.CostUSD > MaxChainCostUSD {
			bad(path+".cost_usd", b.CostUSD, fmt.Sprintf("must be between 0 and %g (0: no cost budget)", MaxChainCostUSD))
		}
		if b.Tokens == 0 && b.CostUSD == 0 && !b.FromHeader {
			bad(path, nil, "must set tokens, cost_usd or from_header: true")
		}
		if b.FromHeader && e.Callers == nil {
			bad(path+".from_header", true, "applies to callers edges only: a Baton's handoff carries its chain's budget itself")
		}
	}
}

// hostAllowed reports whether host:port h is one of allowed, or within a
// "*." entry of it (h may itself be such an entry).
func hostAllowed(allowed []string, h string) bool {
	h = strings.ToLower(h)
	for _, a := range allowed {
		a = strings.ToLower(a)
		if a == h || (strings.HasPrefix(a, "*.") && strings.HasSuffix(h, a[1:])) {
			return true
		}
	}
	return false
}
