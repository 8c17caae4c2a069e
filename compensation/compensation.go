// Package compensation undoes what an abandoned trace did
// (docs/compensation.md). It owns:
//
//   - the side effects each handoff's receiver reported (the edge tells it
//     each answer: Answered), with the answer's body kept for the
//     compensation's template (store keys {trace}:answer:…);
//   - abandoning a trace, by hand or after compensation.abandon_after or a
//     dropped dead letter: the mark, the pending list and the steps (store
//     keys {trace}:abandon, {trace}:step:…, abandon:pending), each step's
//     compensation sent once, latest first, through this Baton's egress
//     chain like any handoff of its agent;
//   - the admin API: POST and GET /v1/traces/{trace_id}/abandon, and the
//     metric baton.compensations.
//
// It reaches the request path through Options (the egress chain, the
// book, the store); package deadletter asks it whether a trace was
// abandoned and tells it of dropped dead letters. It uses handoff,
// handoff/record, state, middleware, records, problem and config.
package compensation

import (
	"context"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
)

// Options are what compensation is built from.
type Options struct {
	Config *config.Config
	Store  state.Store
	Book   *record.Book
	Log    *slog.Logger
	Meters metric.MeterProvider // nil: no metrics
	// Background runs fn beside the listeners, until shutdown.
	Background func(fn func(ctx context.Context))
	// Egress is this Baton's egress chain, which compensations leave by
	// (asked for once the request path is built).
	Egress func() http.Handler
}

// Compensator keeps side effects and abandons traces.
type Compensator struct {
	o    Options
	m    *compMetrics
	kick chan struct{} // wakes the abandon loop
}

// New returns the compensator of o.Config.Agent; its abandon loop runs once
// the listeners start.
func New(o Options) (*Compensator, error) {
	m, err := newCompMetrics(o.Meters)
	if err != nil {
		return nil, err
	}
	cr := &Compensator{o: o, m: m, kick: make(chan struct{}, 1)}
	if o.Book.Enabled() {
		o.Background(cr.abandonLoop)
	}
	return cr, nil
}
