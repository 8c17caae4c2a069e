package middleware

// Metrics is Baton's instrumentation through the OpenTelemetry metrics API:
// one set of instruments built from a MeterProvider (exported as Prometheus
// /metrics, over OTLP, or both: that is the provider's business), recorded
// by both chains, the proxy's transport and the store. docs/metrics.md lists
// every series.
//
// Labels are bounded, always: the edge (from, to, side) and small enums
// (outcome, status class, reason, mode, kind, op). Never a trace id, a key,
// a path or anything a client chooses. An edge not in the configuration (a
// sender at ingress when no edges are configured) gets its own labels up to
// maxDynamicEdges of them; the ones after are counted as from="_other".
//
// Recording allocates nothing in steady state and costs little: every
// attribute set is built once (per edge at start-up, per enum value on first
// use) and kept beside what records it. Counters are observable: a request
// adds to an atomic total beside its cached options, and the totals are
// reported when metrics are collected, which keeps the SDK's
// per-measurement attribute work off the request path. Histograms are
// recorded as requests end, into Baton's own lock-free series when the
// provider comes from WithHistograms (metrics_hist.go), into the SDK's
// instruments otherwise.
//
// Measure is the middleware that records what a request did once it is
// done: it reads the Info that AccessLog creates and every later middleware
// fills in. It sits right after AccessLog on both sides. It cannot fail.
//
// This file holds the Metrics type, its histogram buckets and NewMetrics,
// which creates every instrument. The rest is split by concern: the labels
// and their value tables (metrics_labels.go), an edge's series and the
// counters' collection (metrics_edge.go), what a finished request records
// (metrics_request.go), the counters and gauges the proxy reports
// (metrics_counters.go, metrics_gauges.go), the store's and the HTTP
// series (metrics_store.go, metrics_http.go), the correlation counter
// (metrics_correlation.go) and Baton's own histograms (metrics_hist.go).

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Histogram buckets. Handoffs go to agents that may think for minutes, and
// Baton's own refusals take well under a millisecond: the duration buckets
// span both, dense enough around each decade for p50/p95/p99.
var (
	durationBuckets     = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}
	storeBuckets        = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
	hopBuckets          = []float64{1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32}
	completenessBuckets = []float64{0, 0.25, 0.5, 0.75, 1}
	sizeBuckets         = []float64{256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}
	ratioBuckets        = []float64{0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.25, 1.5, 2}
)

// Metrics holds Baton's instruments. A nil *Metrics records nothing: every
// method is safe to call on it.
type Metrics struct {
	meter metric.Meter

	// served counts the requests ended on the listeners (Served).
	served atomic.Int64

	// Recorded as requests end: per edge (indexed by the edge* constants),
	// per store operation and per HTTP server or client.
	edgeHists  [nEdgeHists]*histogram
	storeTime  *histogram
	serverTime *histogram
	clientTime *histogram

	// Observed when metrics are collected: counters from the totals kept
	// in edges and stores, gauges from the proxy's Observe callback.
	requests     metric.Int64ObservableCounter
	retries      metric.Int64ObservableCounter
	uncorrelated metric.Int64ObservableCounter
	correlation  metric.Int64ObservableCounter
	dedupe       metric.Int64ObservableCounter
	violations   metric.Int64ObservableCounter
	sigFailures  metric.Int64ObservableCounter
	denials      metric.Int64ObservableCounter
	untrusted    metric.Int64ObservableCounter
	injections   metric.Int64ObservableCounter
	deadLetters  metric.Int64ObservableCounter
	transitions  metric.Int64ObservableCounter
	storeErrors  metric.Int64ObservableCounter

	breakerState    metric.Int64ObservableGauge
	budgetRemaining metric.Float64ObservableGauge
	budgetShare     metric.Float64ObservableGauge
	deadLetterDepth metric.Int64ObservableGauge

	server [3]*HTTPSeries // by Side

	mu      sync.Mutex // serialises adding edges and stores
	edges   atomic.Pointer[map[edgeKey]*Edge]
	dynamic int
	// externals finds an external destination's edge by its name, without
	// the lock; named counts those labelled by name (maxExternalEdges).
	externals atomic.Pointer[map[externalKey]*Edge]
	named     int
	stores    atomic.Pointer[[]*StoreSeries]
}

// The histograms recorded per edge, in Metrics.edgeHists and Edge.hists.
const (
	edgeDuration = iota
	edgeHops
	edgeCompleteness
	edgeEnvSize
	edgeEnvRatio
	nEdgeHists
)

// NewMetrics creates Baton's instruments from mp; a nil mp gives a nil
// *Metrics, which records nothing.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	if mp == nil {
		return nil, nil
	}
	b := builder{}
	if p, ok := mp.(*histProvider); ok {
		mp, b.own = p.MeterProvider, p.h
	}
	m := &Metrics{meter: mp.Meter(meterName)}
	mt := m.meter
	m.edgeHists = [nEdgeHists]*histogram{
		edgeDuration:     b.f64Hist(mt, "baton.handoff.duration", "s", "Time from a request's arrival at Baton until its response headers were sent, per edge and side.", durationBuckets),
		edgeHops:         b.i64Hist(mt, "baton.handoff.hops", "{hop}", "Handoff depth within its trace (Baton-Hop).", hopBuckets),
		edgeCompleteness: b.f64Hist(mt, "baton.contract.completeness", "1", "Completeness of checked envelopes (0 to 1).", completenessBuckets),
		edgeEnvSize:      b.i64Hist(mt, "baton.envelope.size", "By", "Size of checked envelopes.", sizeBuckets),
		edgeEnvRatio:     b.f64Hist(mt, "baton.envelope.size_ratio", "1", "Envelope size over the edge's contract max_bytes (edges with a cap).", ratioBuckets),
	}
	m.storeTime = b.f64Hist(mt, "baton.store.duration", "s", "State store operations, by op.", storeBuckets)
	m.serverTime = b.f64Hist(mt, "http.server.request.duration", "s", "Duration of HTTP server requests (egress and ingress listeners).", durationBuckets)
	m.clientTime = b.f64Hist(mt, "http.client.request.duration", "s", "Duration of HTTP client requests until response headers (each try to a peer, the local agent or an external host).", durationBuckets)

	m.requests = b.counter(mt, "baton.handoff.requests", "{request}", "Requests by edge, side, outcome and status class.")
	m.retries = b.counter(mt, "baton.handoff.retries", "{retry}", "Tries after the first, per egress edge.")
	m.uncorrelated = b.counter(mt, "baton.handoff.uncorrelated", "{request}", "Outbound handoffs Baton could not tie to an inbound one.")
	m.correlation = b.counter(mt, "baton.handoff.correlation", "{request}", "Outbound handoffs by how they were tied to the inbound handoff their agent was handling.")
	m.dedupe = b.counter(mt, "baton.dedupe.outcomes", "{request}", "What the ingress dedupe window did with a request.")
	m.violations = b.counter(mt, "baton.contract.violations", "{violation}", "Envelope contract violations, by edge, mode and kind.")
	m.sigFailures = b.counter(mt, "baton.signature.failures", "{request}", "Inbound handoffs refused for their signature, by reason.")
	m.denials = b.counter(mt, "baton.policy.denials", "{request}", "Requests refused by edge policy, by reason.")
	m.untrusted = b.counter(mt, "baton.untrusted.labels", "{label}", "Untrusted-content labels attached to handoffs.")
	m.injections = b.counter(mt, "baton.untrusted.injections", "{request}", "Handoffs whose untrusted content was flagged as a likely prompt injection.")
	m.deadLetters = b.counter(mt, "baton.dead_letter.writes", "{record}", "Handoffs dead-lettered.")
	m.transitions = b.counter(mt, "baton.breaker.transitions", "{transition}", "Circuit breaker state changes, by the state entered.")
	m.storeErrors = b.counter(mt, "baton.store.errors", "{error}", "State store operations that failed, by op.")

	m.breakerState = b.i64Gauge(mt, "baton.breaker.state", "{state}", "Circuit breaker state per peer: 0 closed, 1 half-open, 2 open.")
	m.budgetRemaining = b.f64Gauge(mt, "baton.retry_budget.remaining", "{retry}", "Retries the edge's retry budget still allows in its window.")
	m.budgetShare = b.f64Gauge(mt, "baton.retry_budget.available", "1", "Share of the edge's retry budget still available (1 untouched, 0 exhausted).")
	m.deadLetterDepth = b.i64Gauge(mt, "baton.dead_letter.depth", "{record}", "Dead letters waiting, per edge.")
	if b.err != nil {
		return nil, b.err
	}
	for _, s := range []Side{Egress, Ingress} {
		m.server[s] = &HTTPSeries{h: m.serverTime, base: []attribute.KeyValue{keySide.String(s.String())}}
	}
	edges := map[edgeKey]*Edge{}
	m.edges.Store(&edges)
	m.externals.Store(&map[externalKey]*Edge{})
	m.stores.Store(&[]*StoreSeries{})
	if _, err := mt.RegisterCallback(m.observeCounters, m.requests, m.retries, m.uncorrelated, m.correlation, m.dedupe,
		m.violations, m.sigFailures, m.denials, m.untrusted, m.injections, m.deadLetters, m.transitions,
		m.storeErrors); err != nil {
		return nil, err
	}
	return m, nil
}

// builder creates instruments, keeping the first error; histograms in own
// when it is set.
type builder struct {
	own *Histograms
	err error
}

func (b *builder) keep(err error) {
	if b.err == nil && err != nil {
		b.err = err
	}
}

func (b *builder) f64Hist(mt metric.Meter, name, unit, desc string, bounds []float64) *histogram {
	if b.own != nil {
		return b.own.instrument(name, unit, desc, bounds, false)
	}
	h, err := mt.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
	b.keep(err)
	return &histogram{name: name, unit: unit, desc: desc, bounds: bounds, f64: h}
}

func (b *builder) i64Hist(mt metric.Meter, name, unit, desc string, bounds []float64) *histogram {
	if b.own != nil {
		return b.own.instrument(name, unit, desc, bounds, true)
	}
	h, err := mt.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
	b.keep(err)
	return &histogram{name: name, unit: unit, desc: desc, bounds: bounds, isInt: true, i64: h}
}

func (b *builder) counter(mt metric.Meter, name, unit, desc string) metric.Int64ObservableCounter {
	c, err := mt.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.keep(err)
	return c
}

func (b *builder) i64Gauge(mt metric.Meter, name, unit, desc string) metric.Int64ObservableGauge {
	g, err := mt.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.keep(err)
	return g
}

func (b *builder) f64Gauge(mt metric.Meter, name, unit, desc string) metric.Float64ObservableGauge {
	g, err := mt.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.keep(err)
	return g
}
