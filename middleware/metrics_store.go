package middleware

// The state store's series: per operation, its duration and its errors.

import (
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// StoreSeries is one store operation's labels, duration series and error
// total.
type StoreSeries struct {
	h    *histogram
	set  attribute.Set
	rec  []metric.RecordOption
	time atomic.Pointer[series] // built on first use
	errs cell
}

// Store returns the series of a store operation; op is one of a fixed set
// of names (the store's method names in snake_case), taken once at
// start-up.
func (m *Metrics) Store(op string) *StoreSeries {
	if m == nil {
		return nil
	}
	attrs := attribute.NewSet(keyOp.String(op))
	set := metric.WithAttributeSet(attrs)
	s := &StoreSeries{h: m.storeTime, set: attrs, rec: []metric.RecordOption{set}}
	s.errs.opts.Store(&[]metric.ObserveOption{set})
	m.mu.Lock()
	defer m.mu.Unlock()
	next := append(append([]*StoreSeries{}, *m.stores.Load()...), s)
	m.stores.Store(&next)
	return s
}

// Done records an operation that started at start; err counts it as
// failed.
func (s *StoreSeries) Done(start time.Time, err error) {
	if s != nil {
		s.done(time.Since(start), err)
	}
}

func (s *StoreSeries) done(d time.Duration, err error) {
	t := s.time.Load()
	if t == nil {
		s.time.CompareAndSwap(nil, s.h.series(s.set, s.rec))
		t = s.time.Load()
	}
	t.record(d.Seconds())
	if err != nil {
		s.errs.n.Add(1)
	}
}
