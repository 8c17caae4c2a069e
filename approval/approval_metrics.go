package approval

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/handoff/record"
)

// approvalMetrics are the confirmation gates' instruments
// (docs/metrics.md). A nil *approvalMetrics records nothing.
type approvalMetrics struct {
	heldN   metric.Int64Counter
	decideN metric.Int64Counter
	age     metric.Float64Histogram
	reg     metric.Registration

	mu      sync.Mutex
	pending int64
	counted time.Time
}

func newApprovalMetrics(mp metric.MeterProvider) (*approvalMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	mt := mp.Meter("github.com/batonproxy/baton")
	m := &approvalMetrics{}
	var e1, e2, e3 error
	m.heldN, e1 = mt.Int64Counter("baton.approvals.held", metric.WithUnit("{handoff}"),
		metric.WithDescription("Handoffs a confirmation gate held for approval, per edge and gate."))
	m.decideN, e2 = mt.Int64Counter("baton.approvals.decided", metric.WithUnit("{handoff}"),
		metric.WithDescription("Held handoffs decided, per edge and decision (approved, denied, expired)."))
	m.age, e3 = mt.Float64Histogram("baton.approvals.age", metric.WithUnit("s"),
		metric.WithDescription("How long held handoffs waited for their decision, per decision."),
		metric.WithExplicitBucketBoundaries(1, 5, 15, 60, 300, 900, 3600, 4*3600, 12*3600, 24*3600, 72*3600))
	if err := errors.Join(e1, e2, e3); err != nil {
		return nil, fmt.Errorf("proxy: approval metrics: %w", err)
	}
	return m, nil
}

// observePending registers the pending gauge, counted from the store at
// most every 5 s (count reads it).
func (m *approvalMetrics) observePending(mp metric.MeterProvider, agent string, count func(context.Context) (int64, error)) error {
	if m == nil {
		return nil
	}
	g, err := mp.Meter("github.com/batonproxy/baton").Int64ObservableGauge("baton.approvals.pending",
		metric.WithUnit("{handoff}"), metric.WithDescription("Handoffs held and waiting for a decision (the store's pending list)."))
	if err != nil {
		return fmt.Errorf("proxy: approval metrics: %w", err)
	}
	attrs := metric.WithAttributes(attribute.String("agent", agent))
	m.reg, err = mp.Meter("github.com/batonproxy/baton").RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if time.Since(m.counted) >= 5*time.Second {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if n, err := count(ctx); err == nil {
				m.pending, m.counted = n, time.Now()
			}
		}
		o.ObserveInt64(g, m.pending, attrs)
		return nil
	}, g)
	return err
}

// stale makes the next collection count the pending list again.
func (m *approvalMetrics) stale() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.counted = time.Time{}
	m.mu.Unlock()
}

func (m *approvalMetrics) held(rec *record.Record) {
	if m == nil {
		return
	}
	m.stale()
	m.heldN.Add(context.Background(), 1, metric.WithAttributes(attribute.String("from", rec.From),
		attribute.String("to", rec.To), attribute.String("gate", rec.Approval.Gate)))
}

func (m *approvalMetrics) decided(rec *record.Record) {
	if m == nil {
		return
	}
	m.stale()
	a := rec.Approval
	ctx := context.Background()
	m.decideN.Add(ctx, 1, metric.WithAttributes(attribute.String("from", rec.From), attribute.String("to", rec.To),
		attribute.String("decision", a.Decision)))
	if a.At != nil {
		m.age.Record(ctx, a.At.Sub(rec.Created).Seconds(), metric.WithAttributes(attribute.String("decision", a.Decision)))
	}
}
