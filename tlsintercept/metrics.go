package tlsintercept

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Results of a request for a leaf, as the metric label result.
const (
	resultHit  = "hit"  // served without minting: cached, or minted by a concurrent request for the name
	resultMiss = "miss" // minted for this request
)

// minterMetrics are the minter's instruments. Names are not labels: under
// a wildcard entry they are the agent's to choose. A nil *minterMetrics
// records nothing.
type minterMetrics struct {
	minted    metric.Int64Counter
	cache     metric.Int64Counter
	duration  metric.Float64Histogram
	hit, miss metric.AddOption
}

func newMinterMetrics(mp metric.MeterProvider) (*minterMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	mt := mp.Meter("github.com/batonproxy/baton")
	m := &minterMetrics{
		hit:  metric.WithAttributeSet(attribute.NewSet(attribute.String("result", resultHit))),
		miss: metric.WithAttributeSet(attribute.NewSet(attribute.String("result", resultMiss))),
	}
	var err, err2, err3 error
	m.minted, err = mt.Int64Counter("baton.tls.intercept.certificates.minted", metric.WithUnit("{certificate}"),
		metric.WithDescription("Leaf certificates minted for intercepted destinations."))
	m.cache, err2 = mt.Int64Counter("baton.tls.intercept.certificate.cache", metric.WithUnit("{request}"),
		metric.WithDescription("Requests for a leaf certificate, by result: hit (served without minting), miss (minted)."))
	m.duration, err3 = mt.Float64Histogram("baton.tls.intercept.mint.duration", metric.WithUnit("s"),
		metric.WithDescription("Time to mint a leaf certificate: its key and its signature."),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1))
	if err := errors.Join(err, err2, err3); err != nil {
		return nil, fmt.Errorf("tlsintercept: metrics: %w", err)
	}
	return m, nil
}

func (m *minterMetrics) lookup(hit bool) {
	if m == nil {
		return
	}
	o := m.miss
	if hit {
		o = m.hit
	}
	m.cache.Add(context.Background(), 1, o)
}

func (m *minterMetrics) mint(d time.Duration) {
	if m == nil {
		return
	}
	m.minted.Add(context.Background(), 1)
	m.duration.Record(context.Background(), d.Seconds())
}
