// Package approval holds handoffs for a person's decision: confirmation
// gates (docs/gates.md). It owns:
//
//   - the gates of the outbound edges that have one, and holding a handoff
//     a gate's rule matches: a record in state held with its checkpoint,
//     listed among the agent's pending approvals (gate.go, approvals.go);
//   - deciding: approvers (the admin token, approver tokens, signed
//     requests), the decision claimed once, the approved handoff sent with
//     its original key, trace and hop, expiry (approvals.go,
//     admin_identity.go);
//   - what the agent polls (a Location on the egress listener, or an A2A
//     task), the approvers' notifications, the metrics, and the admin API
//     /v1/approvals (approval_*.go);
//   - store keys approval-key:…, {trace}:approval-decision:…,
//     {trace}:approval-answer:…, approval-nonce:….
//
// It reaches the request path through Options (send a record's checkpoint
// on its edge; the egress listener's address); the request path asks it,
// per handoff on a gated edge, whether to hold it (Hold). It uses
// handoff/record, state, trust, middleware, records, problem and config.
package approval

import (
	"context"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// Options are what the approvals are built from.
type Options struct {
	Config *config.Config
	Store  state.Store
	Book   *record.Book
	Log    *slog.Logger
	Meters metric.MeterProvider // nil: no metrics
	Env    func(string) string
	// Signer is this Baton's identity key: its agent's signed decisions
	// are recognised, and refused (nil: none).
	Signer *trust.Signer
	// Background runs fn beside the listeners, until shutdown.
	Background func(fn func(ctx context.Context))
	// Resend sends rec's checkpoint on its edge, with its original key,
	// trace and hop (the request path's tries, breaker and record).
	Resend func(ctx context.Context, rec *record.Record, first record.State, why string) (resp *http.Response, done func(), err error)
	// EgressAddr is the egress listener's address, for the Location the
	// agent polls (asked for once it listens).
	EgressAddr func() string
}

// New returns the approvals of o.Config.Agent: its gates, its approvers,
// and, once the listeners start, the sweep of expired approvals and the
// sending of approved handoffs a stop interrupted.
func New(o Options) (*Approvals, error) {
	c := o.Config
	ap, err := newApprovers(c, o.Env, o.Signer)
	if err != nil {
		return nil, err
	}
	m, err := newApprovalMetrics(o.Meters)
	if err == nil {
		err = m.observePending(o.Meters, c.Agent, func(ctx context.Context) (int64, error) {
			return o.Book.PendingCount(ctx, c.Agent)
		})
	}
	if err != nil {
		return nil, err
	}
	a := &Approvals{o: o, retention: c.Records.Retention.D(), notify: newNotifier(c.Approvals.Notify, o.Log), m: m,
		gates: map[string]*gate{}, approvers: ap, waiters: map[string][]chan struct{}{}}
	for name := range c.Peers {
		if g := newGate(c, name); g != nil {
			a.gates[name] = g
		}
	}
	if c.GatesOn() && o.Book.Enabled() {
		o.Background(a.sweep)
	}
	return a, nil
}

// Gated reports whether any outbound edge has a gate.
func (a *Approvals) Gated() bool { return len(a.gates) > 0 }

// Hold implements proxy.Gate: a handoff on the edge to peer that its gate
// holds is answered here (held, refused, or met with an approval it
// already has); nil and no error send it on. The agent's A2A read of a
// held task is answered here too. newRecord makes the handoff's record and
// checkpoint as the edge would.
func (a *Approvals) Hold(peer string, req *http.Request, in *middleware.Info, newRecord func() *record.Record) (*http.Response, error) {
	g := a.gates[peer]
	if g == nil {
		return nil, nil
	}
	if resp := a.taskRead(req, in, peer); resp != nil {
		return resp, nil
	}
	rule, ok := g.match(req, in)
	if !ok {
		return nil, nil
	}
	return a.hold(g, req, in, rule, newRecord)
}
