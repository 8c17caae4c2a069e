// Package modelcall makes the agent's calls to model APIs first-class
// (docs/model-calls.md). At egress, every call to a destination that serves
// a model API (a route with an api, a host in models.hosts, a provider's
// public host) is understood as it passes (package genai): its provider,
// operation, model, tokens, finish reasons, latency and time to first
// token, streams included. Each becomes the egress span's GenAI attributes
// (named "{operation} {model}", a child of the handling it served), the
// GenAI client metrics and Baton's own counters of tokens and cost, and an
// entry of its handling's model summary in the receipt, so that a trace
// says what each agent spent. A call answered from the journal is marked
// so and spends nothing.
//
// It also bounds spending. Before a call goes out (not for a journal hit)
// it is refused when its handling has made models.max_calls_per_handling
// calls (a loop breaker), or when its chain has a budget
// (Baton-Chain-Budget) and the chain's count in the store has reached it:
// Baton answers in the provider's own error shape, so the agent's SDK
// raises its usual error, and the refusal is recorded. The count is one
// store round trip before the call and one after its answer, only for
// chains with a budget; calls in flight when a budget is crossed may
// overshoot it by their own spend, no more.
//
// It owns the store keys genai/chain/{trace} (a chain's counters) and
// genai/costly/{hour} (the chains that spent most), and the gen_ai.client.*
// and baton.genai.* metrics. It plugs into the egress transport on both
// sides of the journal (Observe outside, Guard inside, so that a journal
// hit is seen and never refused), is told of each handling's end, and adds
// admin routes. It uses middleware, handoff/record, state, config and
// genai.
package modelcall

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/genai"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
)

// Options are what the model calls' capability is built from.
type Options struct {
	Config *config.Config
	Store  state.Store
	Log    *slog.Logger
	Meters metric.MeterProvider // nil: no metrics
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Calls is one Baton's understanding and bounding of its agent's model
// calls.
type Calls struct {
	store     state.Store
	log       *slog.Logger
	apis      apis
	prices    *genai.Prices
	maxCalls  int
	denyBlind bool // models.on_store_error: deny
	maxBody   int64
	retention time.Duration
	now       func() time.Time
	m         *metrics
}

// New returns the capability o.Config configures.
func New(o Options) (*Calls, error) {
	c := o.Config
	prices, err := genai.DefaultPrices().With(pricesOf(c.Models.Prices))
	if err != nil {
		return nil, fmt.Errorf("modelcall: models.prices: %w", err)
	}
	m, err := newMetrics(o.Meters, c.Agent)
	if err != nil {
		return nil, err
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Calls{store: o.Store, log: o.Log, apis: newAPIs(c), prices: prices,
		maxCalls: c.Models.CallsPerHandling(), denyBlind: c.Models.OnStoreError == config.ModelsDeny,
		maxBody: max(c.Limits.MaxBodyBytes, 1), retention: c.Records.Retention.D(), now: now, m: m}, nil
}

// pricesOf turns configured prices into genai's.
func pricesOf(ps map[string]config.Price) map[string]genai.Price {
	out := make(map[string]genai.Price, len(ps))
	for name, p := range ps {
		gp := genai.Price{InputPerMTok: p.Input, OutputPerMTok: p.Output, CachedInputPerMTok: p.Input, CacheWritePerMTok: p.Input}
		if p.CachedInput != nil {
			gp.CachedInputPerMTok = *p.CachedInput
		}
		if p.CacheWrite != nil {
			gp.CacheWritePerMTok = *p.CacheWrite
		}
		out[name] = gp
	}
	return out
}

// Observe understands the model calls among the requests next carries: it
// sits outside the journal, so that it sees the journal's answers too.
func (mc *Calls) Observe(next http.RoundTripper) http.RoundTripper {
	return observe{mc: mc, next: next}
}

// Guard refuses the model calls their handling or chain may not make: it
// sits inside the journal, so that only calls that would go out are
// checked.
func (mc *Calls) Guard(next http.RoundTripper) http.RoundTripper {
	return guard{mc: mc, next: next}
}

// HandlingEnded adds what the handling's model calls cost to the index of
// the chains that cost most, in the background.
func (mc *Calls) HandlingEnded(h *middleware.Handling) {
	s := h.ModelSummary()
	if s == nil || (s.CostUSD == 0 && s.InputTokens+s.OutputTokens == 0) {
		return
	}
	at := mc.now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeWrite)
		defer cancel()
		if err := mc.noteCostly(ctx, h.TraceID, at, s.CostUSD, s.InputTokens+s.OutputTokens); err != nil {
			mc.log.Warn("model calls: the chain's spend was not indexed", "trace_id", h.TraceID, "error", err.Error())
		}
	}()
}

// storeWrite bounds a store write of the chains' counts.
const storeWrite = 2 * time.Second
