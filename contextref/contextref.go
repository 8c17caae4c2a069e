// Package contextref passes a handoff's context by reference and holds it to
// the receiver's token budget (docs/context.md). It owns:
//
//   - wiring the middlewares of package middleware (ContextRefs, Budget) to
//     the edges' context blocks: by_reference and its min_bytes, the
//     inbound edge's deliver mode, each outbound edge's token budget (its
//     tokenizer loaded once) and field policy (contextref.go, budget.go);
//   - the agent's lazy read of referenced content, GET /v1/context/{digest}
//     on the egress listener, to an agent on the trace only (serve.go);
//   - the metrics baton.context.refs, baton.context.bytes and
//     baton.budget.handoffs (metrics.go).
//
// The content itself is kept under the store keys of middleware.ContextKey
// ({trace}:ctx:…), which the middlewares write and read.
//
// It reaches the request path through Options (the handlings in flight,
// the records, the untrusted-content labels, the egress chain); the request
// path runs its middlewares in the egress and ingress chains and sends it
// the agent's reads. It uses middleware, handoff, handoff/record, state,
// trust, config, problem and records (its store problems).
package contextref

import (
	"context"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
)

// PathPrefix is where, on the egress listener, the agent reads referenced
// content: the ref an artifact carries.
const PathPrefix = handoff.ContextPath

// Handlings finds the inbound handoffs of a trace the agent is handling
// (the request path's registry; middleware.Handlings has it).
type Handlings interface {
	OfTrace(traceID string, buf []*middleware.Handling) []*middleware.Handling
}

// Labels remembers what the agent read from an untrusted source, so that
// a handoff copying it is labelled (*middleware.Taint has it).
type Labels interface {
	RememberRead(ctx context.Context, traceID, source string, text []byte)
}

// Options are what the context by reference is built from.
type Options struct {
	Config *config.Config
	Store  state.Store
	// Book reads the trace's records: an agent that received one of its
	// handoffs is on the trace.
	Book   *record.Book
	Log    *slog.Logger
	Meters metric.MeterProvider // nil: no metrics
	// Handlings are the inbound handoffs the agent is handling: an agent
	// handling one of the trace's is on it.
	Handlings Handlings
	// Labels remembers untrusted content the agent reads.
	Labels Labels
	// Egress is the egress chain, for a request on the context path that
	// names a peer rather than the Baton (asked for per such request).
	Egress func() http.Handler
}

// Refs are the context by reference and the token budgets of one Baton's
// edges.
type Refs struct {
	o      Options
	m      *contextMetrics
	refs   *middleware.ContextRefs
	egress func(http.Handler) http.Handler
}

// New builds the middlewares for o.Config's edges: the budgets' tokenizers
// are loaded here.
func New(o Options) (*Refs, error) {
	m, err := newContextMetrics(o.Meters)
	if err != nil {
		return nil, err
	}
	x := &Refs{o: o, m: m}
	c := o.Config
	x.refs = middleware.NewContextRefs(middleware.ContextOptions{
		Store: o.Store, TTL: c.Records.Retention.D(), Log: o.Log, Observe: m.observe,
		MinBytes: func(in *middleware.Info) int {
			if cx := c.ContextOut(in.To); cx != nil && cx.ByReference != nil {
				return cx.ByReference.MinBytes
			}
			return 0
		},
		ByReference: func(in *middleware.Info) bool { return c.Deliver(in.From) == config.DeliverReference },
		OnTrace:     x.onTrace,
	})
	budgets, err := budgetPolicies(c, o.Log)
	if err != nil {
		return nil, err
	}
	budget := middleware.Budget(middleware.BudgetOptions{Policy: budgets, Refs: x.refs, Observe: m.observeBudget})
	x.egress = func(next http.Handler) http.Handler { return x.refs.Egress(budget(next)) }
	return x, nil
}

// Egress is the egress middleware: large artifacts leave by reference,
// then the edge's token budget and field policy shape what is left. It
// sits after the untrusted-content labels (content copied from the web is
// found while still inline) and before the envelope contract.
func (x *Refs) Egress(next http.Handler) http.Handler { return x.egress(next) }

// Ingress is the ingress middleware: referenced content is inlined for the
// agent or left for it to read, as its inbound edge delivers. It sits after
// the MCP rules and before the envelope contract.
func (x *Refs) Ingress(next http.Handler) http.Handler { return x.refs.Ingress(next) }
