package proxy

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
)

// Span attributes the egress edge adds to the handoff's span (or to a
// replay's).
const (
	attrResendCount = attribute.Key("http.request.resend_count")
	attrDeadLetter  = attribute.Key("baton.dead_letter.record_id")
	attrStoppedAt   = attribute.Key("baton.chain.stopped_at")
)

// edgeObs is what an egress edge reports to: its metric labels, and the
// dead-letter depth to recount when it writes one.
type edgeObs struct {
	m      *middleware.Metrics
	series *middleware.Edge
	depth  *deadLetterDepth
}

// handoff reports what the tries of a handoff did: retries (as a count and
// as the span's http.request.resend_count), a dead letter (counted, named
// on the span and in the request's Info), and the dead letter where the
// chain below stopped (named on the span as baton.chain.stopped_at).
func (o *edgeObs) handoff(ctx context.Context, rec *record.Record, retries int) {
	dead := rec.State == record.Dead
	if retries <= 0 && !dead && rec.StoppedAt == "" {
		return
	}
	span := trace.SpanFromContext(ctx)
	if rec.StoppedAt != "" {
		span.SetAttributes(attrStoppedAt.String(rec.StoppedAt))
	}
	if retries > 0 {
		span.SetAttributes(attrResendCount.Int(retries))
	}
	if dead {
		span.SetAttributes(attrDeadLetter.String(rec.ID))
		if in := middleware.InfoFromContext(ctx); in != nil {
			in.DeadLetter = rec.ID
		}
	}
	if o == nil {
		return
	}
	o.m.Retries(o.series, retries)
	if dead {
		o.m.DeadLetter(o.series)
		o.depth.stale()
	}
}

func (o *edgeObs) transition(state int) {
	if o != nil {
		o.m.BreakerTransition(o.series, state)
	}
}

// serverMetrics is a Server's instrumentation; without a MeterProvider m is
// nil and nothing is recorded.
type serverMetrics struct {
	m       *middleware.Metrics
	depth   *deadLetterDepth
	handler http.Handler // GET /metrics, or nil
	stop    func()
}

// newServerMetrics builds the instruments and returns the store to use: o's,
// measured.
func newServerMetrics(o Options) (*serverMetrics, state.Store, error) {
	m, err := middleware.NewMetrics(o.MeterProvider)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy: metrics: %w", err)
	}
	sm := &serverMetrics{m: m, depth: &deadLetterDepth{every: 5 * time.Second}, handler: o.Metrics, stop: func() {}}
	return sm, measureStore(o.Store, m, sm.depth.stale), nil
}

// observeEdges gives every egress edge its labels and client series, and
// registers the gauges of breakers, retry budgets and dead letters. It runs
// once the edges are built.
func (s *Server) observeEdges() error {
	sm := s.sm
	sm.depth.book = s.book
	if sm.m == nil {
		return nil
	}
	obs := map[string]*edgeObs{}
	for name, e := range s.edges {
		e.obs = &edgeObs{m: sm.m, series: sm.m.Edge(middleware.Egress, s.cfg.Agent, name), depth: sm.depth}
		e.next = measureClient(sm.m, e.next, name)
		obs[name] = e.obs
	}
	for _, e := range s.cfg.Edges {
		if e.From != "" {
			sm.m.Edge(middleware.Ingress, e.From, s.cfg.Agent)
		}
	}
	stop, err := sm.m.Observe(func(ctx context.Context, g middleware.Gauges) {
		counts := sm.depth.get(ctx, s.cfg.Agent, s.edges)
		for name, e := range s.edges {
			series := obs[name].series
			g.Breaker(series, int64(e.breaker.State()))
			left, share := e.budget.remaining()
			g.RetryBudget(series, left, share)
			if n, ok := counts[name]; ok {
				g.DeadLetters(series, n)
			}
		}
	})
	if err != nil {
		return fmt.Errorf("proxy: metrics: %w", err)
	}
	sm.stop = stop
	return nil
}

// metricsRoute serves GET /metrics on the admin listener when the process
// exports Prometheus metrics.
func (s *Server) metricsRoute(r chi.Router) {
	if s.sm.handler != nil {
		r.Method(http.MethodGet, "/metrics", s.sm.handler)
	}
}

// deadLetterDepth caches the dead-letter count of each edge: counting is a
// store call per edge, so it is refreshed at most every few seconds (at
// once after this Baton wrote one), not at every collection.
type deadLetterDepth struct {
	book  *record.Book
	every time.Duration

	mu     sync.Mutex
	at     time.Time
	counts map[string]int64
}

// stale makes the next collection recount.
func (d *deadLetterDepth) stale() {
	d.mu.Lock()
	d.at = time.Time{}
	d.mu.Unlock()
}

// get returns the counts by peer; a count the store did not give keeps its
// last value (or is absent).
func (d *deadLetterDepth) get(ctx context.Context, agent string, edges map[string]*edge) map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts != nil && time.Since(d.at) < d.every {
		return d.counts
	}
	if !d.book.Enabled() {
		return nil
	}
	next := make(map[string]int64, len(edges))
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for name := range edges {
		n, err := d.book.DeadLetterCount(ctx, record.EdgeDeadLetters(agent+"→"+name))
		if err != nil {
			if v, ok := d.counts[name]; ok {
				next[name] = v
			}
			continue
		}
		next[name] = n
	}
	d.counts, d.at = next, time.Now()
	return next
}

// measuredTransport records http.client.request.duration for each request
// it sends, until the response headers.
type measuredTransport struct {
	next   http.RoundTripper
	series *middleware.HTTPSeries
}

func (t *measuredTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	t.series.Record(r.Method, status, time.Since(start))
	return resp, err
}

// measureClient wraps rt to record its requests' durations; without
// metrics it is rt.
func measureClient(m *middleware.Metrics, rt http.RoundTripper, server string) http.RoundTripper {
	if m == nil {
		return rt
	}
	return &measuredTransport{next: rt, series: m.Client(server)}
}
