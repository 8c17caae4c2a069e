package middleware

// The egress edges' gauges (breaker state, retry budget, dead letters
// waiting), which the proxy reports through Gauges from an Observe callback
// each time metrics are collected.

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// Gauges is what an Observe callback reports the egress edges' state
// through.
type Gauges struct {
	o metric.Observer
	m *Metrics
}

// Breaker reports the breaker state of an edge (0 closed, 1 half-open, 2
// open).
func (g Gauges) Breaker(e *Edge, state int64) { g.o.ObserveInt64(g.m.breakerState, state, e.obs...) }

// RetryBudget reports the retries an edge's budget still allows, and that
// as a share of what it allows in all.
func (g Gauges) RetryBudget(e *Edge, remaining, share float64) {
	g.o.ObserveFloat64(g.m.budgetRemaining, remaining, e.obs...)
	g.o.ObserveFloat64(g.m.budgetShare, share, e.obs...)
}

// DeadLetters reports the dead letters waiting on an edge.
func (g Gauges) DeadLetters(e *Edge, depth int64) {
	g.o.ObserveInt64(g.m.deadLetterDepth, depth, e.obs...)
}

// Observe registers fn to report the gauges each time metrics are
// collected; stop unregisters it.
func (m *Metrics) Observe(fn func(ctx context.Context, g Gauges)) (stop func(), err error) {
	if m == nil {
		return func() {}, nil
	}
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		fn(ctx, Gauges{o: o, m: m})
		return nil
	}, m.breakerState, m.budgetRemaining, m.budgetShare, m.deadLetterDepth)
	if err != nil {
		return nil, err
	}
	return func() { _ = reg.Unregister() }, nil
}
