package genai

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
)

// Price is what a model costs, in US dollars per million tokens. Cached
// input and cache writes at 0 cost the input price: a model whose provider
// publishes no separate price for them bills them as input.
type Price struct {
	InputPerMTok       float64 `json:"input" yaml:"input"`
	CachedInputPerMTok float64 `json:"cached_input" yaml:"cached_input"`
	CacheWritePerMTok  float64 `json:"cache_write" yaml:"cache_write"`
	OutputPerMTok      float64 `json:"output" yaml:"output"`
}

// MaxPricePerMTok is the largest price believed, in USD per million tokens;
// a larger one is a mistake (the dearest models cost a few hundred).
const MaxPricePerMTok = 10_000

// Cost returns what usage u costs at price p, in nano-dollars (10^-9 USD):
// the input that is neither cached nor written to the cache at the input
// price, cached input at the cached price, cache writes at the write
// price, output (reasoning included) at the output price. known is false
// when the usage is not Known or the price is not valid.
func Cost(p Price, u Usage) (nanoUSD int64, known bool) {
	if !u.Known || p.check() != "" {
		return 0, false
	}
	cached, write := p.CachedInputPerMTok, p.CacheWritePerMTok
	if cached == 0 {
		cached = p.InputPerMTok
	}
	if write == 0 {
		write = p.InputPerMTok
	}
	fresh := u.Input - u.CachedInput - u.CacheCreation
	// USD per million tokens is 1,000 nano-dollars per token.
	nano := 1e3 * (float64(fresh)*p.InputPerMTok + float64(u.CachedInput)*cached +
		float64(u.CacheCreation)*write + float64(u.Output)*p.OutputPerMTok)
	if fresh < 0 || !(nano >= 0 && nano < math.MaxInt64/2) {
		return 0, false
	}
	return int64(math.Round(nano)), true
}

// check returns what is wrong with p, or "".
func (p Price) check() string {
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", p.InputPerMTok}, {"cached_input", p.CachedInputPerMTok}, {"cache_write", p.CacheWritePerMTok}, {"output", p.OutputPerMTok}} {
		if !(f.v >= 0 && f.v <= MaxPricePerMTok) {
			return fmt.Sprintf("%s must be from 0 to %d USD per million tokens, got %v", f.name, MaxPricePerMTok, f.v)
		}
	}
	return ""
}

// Prices is a price table: the shipped defaults (DefaultPrices) with
// configured overrides. A Prices is never changed; With returns a new one.
type Prices struct {
	defaults  map[string]Price
	overrides map[priceKey]Price

	// memo holds Lookup's answers, as a call prices the same few models
	// again and again; at most maxMemo of them, so that agents naming
	// models at will cannot grow it.
	// Read without a lock, replaced whole under memoMu when it grows.
	memo   atomic.Pointer[map[priceKey]*memoPrice]
	memoMu sync.Mutex
	// last is the memo's entry Lookup answered from last: a Baton's calls
	// mostly name one model, found by comparing its name, without hashing.
	last atomic.Pointer[memoPrice]
}

// maxMemo bounds the models a Prices remembers the price of.
const maxMemo = 256

// memoPrice is a remembered Lookup.
type memoPrice struct {
	k  priceKey
	p  Price
	ok bool
}

// priceKey names a price: a model, for one dialect or (api 0) for all.
type priceKey struct {
	api   API
	model string
}

// DefaultPrices returns the shipped price table, dated PricesAsOf.
func DefaultPrices() *Prices { return &Prices{defaults: defaultPrices} }

// With returns the table with overrides on top. Each key is a model name,
// or a dialect and a model name ("anthropic/claude-sonnet-4-5",
// "azure-openai/my-deployment", "openai/meta-llama/Llama-3.1-8B-Instruct"):
// a key whose part before the first "/" is no dialect is a model name
// whole. An override applies to the model named and, like a default, to
// its dated snapshots. Every price must be from 0 to MaxPricePerMTok; the
// error lists every one that is not, naming its key.
func (p *Prices) With(overrides map[string]Price) (*Prices, error) {
	next := &Prices{defaults: p.defaults, overrides: make(map[priceKey]Price, len(p.overrides)+len(overrides))}
	for k, v := range p.overrides {
		next.overrides[k] = v
	}
	var errs []error
	for name, price := range overrides {
		k := parsePriceKey(name)
		switch {
		case k.model == "":
			errs = append(errs, fmt.Errorf("genai: price %q: must name a model", name))
		case price.check() != "":
			errs = append(errs, fmt.Errorf("genai: price %q: %s", name, price.check()))
		default:
			next.overrides[k] = price
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return next, nil
}

// parsePriceKey reads an override's key.
func parsePriceKey(name string) priceKey {
	if q, model, ok := strings.Cut(name, "/"); ok {
		if api, ok := ParseAPI(q); ok {
			return priceKey{api, normalModel(model)}
		}
	}
	return priceKey{0, normalModel(name)}
}

// normalModel lowercases a model name and drops Gemini's "models/".
func normalModel(m string) string {
	m = strings.ToLower(strings.TrimSpace(m))
	return strings.TrimPrefix(m, "models/")
}

// Lookup returns the price of model when called in dialect api. The model
// is looked up as it is, then by the longest name in the table that begins
// it and is followed by "-" or "@" in it: a dated snapshot
// (gpt-4o-2024-08-06, claude-sonnet-4-5-20250929, claude-sonnet-4-5@20250929)
// costs what its model does. For each name, an override for the dialect
// comes first, then one for all dialects, then the default. Defaults are
// the providers' list prices for their own APIs, which Azure OpenAI's
// global deployments and OpenAI-compatible gateways passing the same
// models on are taken to match.
func (p *Prices) Lookup(api API, model string) (Price, bool) {
	k := priceKey{api, model}
	if v := p.last.Load(); v != nil && v.k == k {
		return v.p, v.ok
	}
	if m := p.memo.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			p.last.Store(v)
			return v.p, v.ok
		}
	}
	price, ok := p.lookup(api, model)
	p.remember(&memoPrice{k, price, ok})
	return price, ok
}

// remember adds a Lookup's answer to the memo, a new map in place of the
// old, unless the memo is full.
func (p *Prices) remember(v *memoPrice) {
	p.memoMu.Lock()
	defer p.memoMu.Unlock()
	var old map[priceKey]*memoPrice
	if m := p.memo.Load(); m != nil {
		old = *m
	}
	if _, ok := old[v.k]; ok || len(old) >= maxMemo {
		return
	}
	next := make(map[priceKey]*memoPrice, len(old)+1)
	for key, val := range old {
		next[key] = val
	}
	next[v.k] = v
	p.memo.Store(&next)
	p.last.Store(v)
}

// lookup is Lookup, not remembered.
func (p *Prices) lookup(api API, model string) (Price, bool) {
	m := normalModel(model)
	for m != "" {
		if v, ok := p.overrides[priceKey{api, m}]; ok && api != 0 {
			return v, true
		}
		if v, ok := p.overrides[priceKey{0, m}]; ok {
			return v, true
		}
		if v, ok := p.defaults[m]; ok {
			return v, true
		}
		i := strings.LastIndexAny(m, "-@")
		if i < 0 {
			break
		}
		m = m[:i]
	}
	return Price{}, false
}

// Cost returns what a call's answer cost, pricing the model that answered
// (Result.ResponseModel), else the one asked for: Azure's request names a
// deployment, and OpenAI's answer names the dated snapshot. known is false
// when the usage is not Known or neither model has a price.
func (p *Prices) Cost(c Call, r Result) (nanoUSD int64, known bool) {
	price, ok := p.Lookup(c.API, r.ResponseModel)
	if !ok {
		price, ok = p.Lookup(c.API, c.RequestModel)
	}
	if !ok {
		return 0, false
	}
	return Cost(price, r.Usage)
}
