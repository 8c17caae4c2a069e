package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/middleware"
)

// maxToolLabels bounds the tool names that get a label of their own: tool
// names come from agents, so past this many the rest count as "_other".
const maxToolLabels = 256

// mcpMetrics are MCP tool calls per edge, side, tool and outcome, as plain
// OpenTelemetry instruments (docs/metrics.md). A nil *mcpMetrics records
// nothing.
type mcpMetrics struct {
	calls    metric.Int64Counter
	duration metric.Float64Histogram

	mu    sync.Mutex
	attrs map[[5]string]metric.MeasurementOption
	tools map[string]bool
}

func newMCPMetrics(mp metric.MeterProvider) (*mcpMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	mt := mp.Meter("github.com/batonproxy/baton")
	m := &mcpMetrics{attrs: map[[5]string]metric.MeasurementOption{}, tools: map[string]bool{}}
	var err, err2 error
	m.calls, err = mt.Int64Counter("baton.mcp.tool_calls", metric.WithUnit("{call}"),
		metric.WithDescription("MCP tool calls per edge, side, tool and outcome (ok, error, refused)."))
	m.duration, err2 = mt.Float64Histogram("baton.mcp.tool_call.duration", metric.WithUnit("s"),
		metric.WithDescription("MCP tool calls passed on, until the end of their answer."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
	if err := errors.Join(err, err2); err != nil {
		return nil, fmt.Errorf("proxy: mcp metrics: %w", err)
	}
	return m, nil
}

// observe is a middleware.MCPObserver.
func (m *mcpMetrics) observe(in *middleware.Info, tool, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	ctx := context.Background()
	m.calls.Add(ctx, 1, m.with(in, tool, outcome))
	if outcome != middleware.MCPOutcomeRefused {
		m.duration.Record(ctx, d.Seconds(), m.with(in, tool, ""))
	}
}

func (m *mcpMetrics) with(in *middleware.Info, tool, outcome string) metric.MeasurementOption {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.tools[tool] {
		if len(m.tools) >= maxToolLabels {
			tool = "_other"
		} else {
			m.tools[tool] = true
		}
	}
	k := [5]string{in.From, in.To, in.Side.String(), tool, outcome}
	o, ok := m.attrs[k]
	if !ok {
		kvs := []attribute.KeyValue{attribute.String("from", in.From), attribute.String("to", in.To),
			attribute.String("side", in.Side.String()), attribute.String("tool", tool)}
		if outcome != "" {
			kvs = append(kvs, attribute.String("outcome", outcome))
		}
		o = metric.WithAttributeSet(attribute.NewSet(kvs...))
		m.attrs[k] = o
	}
	return o
}
