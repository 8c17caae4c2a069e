package contextref

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/middleware"
)

// contextOps are the operations counted by baton_context_refs_total.
var contextOps = []string{"stored", "reused", "inlined", "referenced", "served", "refused"}

// contextMetrics count referenced content and its bytes by operation. A nil
// *contextMetrics counts nothing.
type contextMetrics struct {
	refs, bytes metric.Int64Counter
	budget      metric.Int64Counter
	attrs       map[string]metric.AddOption
}

func newContextMetrics(mp metric.MeterProvider) (*contextMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	mt := mp.Meter("github.com/batonproxy/baton")
	m := &contextMetrics{attrs: map[string]metric.AddOption{}}
	var err, err2, err3 error
	m.refs, err = mt.Int64Counter("baton.context.refs", metric.WithUnit("{artifact}"),
		metric.WithDescription("Artifacts passed by reference, by operation: stored, reused (already stored for the trace), inlined, referenced (left for the agent), served (read by the agent), refused."))
	m.bytes, err2 = mt.Int64Counter("baton.context.bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes of the artifacts passed by reference, by operation."))
	m.budget, err3 = mt.Int64Counter("baton.budget.handoffs", metric.WithUnit("{handoff}"),
		metric.WithDescription("Handoffs on an edge with a token budget, by outcome: within, trimmed, refused."))
	if err := errors.Join(err, err2, err3); err != nil {
		return nil, fmt.Errorf("contextref: metrics: %w", err)
	}
	for _, op := range contextOps {
		m.attrs[op] = metric.WithAttributeSet(attribute.NewSet(attribute.String("op", op)))
	}
	return m, nil
}

func (m *contextMetrics) observe(ctx context.Context, op string, n int64) {
	if m == nil {
		return
	}
	m.refs.Add(ctx, 1, m.attrs[op])
	if n > 0 {
		m.bytes.Add(ctx, n, m.attrs[op])
	}
}

// observeBudget counts a handoff that met a token budget by outcome.
func (m *contextMetrics) observeBudget(ctx context.Context, in *middleware.Info, outcome string) {
	if m == nil {
		return
	}
	m.budget.Add(ctx, 1, metric.WithAttributes(attribute.String("to", in.To), attribute.String("outcome", outcome)))
}
