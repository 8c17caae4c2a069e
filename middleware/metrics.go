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

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/handoff"
)

// Label values for edge ends Baton does not name after an agent. None is a
// valid agent name (an agent name cannot start with "_").
const (
	LabelExternal = "_external" // egress to a host in external.allow
	LabelUnknown  = "_unknown"  // not known when the request ended (refused before resolution or HopGuard)
	LabelOther    = "_other"    // a sender beyond maxDynamicEdges
)

// maxDynamicEdges bounds the edges labelled by name that the configuration
// does not list.
const maxDynamicEdges = 64

// Metric attribute keys.
var (
	keyFrom        = attribute.Key("from")
	keyTo          = attribute.Key("to")
	keySide        = attribute.Key("side")
	keyOutcome     = attribute.Key("outcome")
	keyStatusClass = attribute.Key("status_class")
	keyReason      = attribute.Key("reason")
	keyMode        = attribute.Key("mode")
	keyKind        = attribute.Key("kind")
	keyState       = attribute.Key("state")
	keyOp          = attribute.Key("op")
	keyMethod      = attribute.Key("http.request.method")
	keyStatus      = attribute.Key("http.response.status_code")
	keyServer      = attribute.Key("server.address")
	keyErrorType   = attribute.Key("error.type")
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

// outcome is what became of a request, as baton.handoff.requests counts it.
type outcome uint8

const (
	outcomeDelivered    outcome = iota // forwarded, and the other side answered
	outcomeReplayed                    // answered from the ingress dedupe window
	outcomeRefused                     // refused by this Baton before it was forwarded
	outcomeFailed                      // forwarded, and no answer came back
	outcomeDeadLettered                // retries exhausted or the breaker open: a dead letter
	nOutcomes
)

var outcomeNames = [nOutcomes]string{"delivered", "replayed", "refused", "failed", "dead_lettered"}

// nClasses are the status classes: "none" (no status was sent), then 1xx to
// 5xx.
const nClasses = 6

var classNames = [nClasses]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx"}

func classOf(status int) int {
	if status < 100 || status > 599 {
		return 0
	}
	return status / 100
}

// The dedupe outcomes, in label order.
var dedupeOutcomes = [...]DedupeOutcome{DedupeClaimed, DedupeReplayed, DedupeConflict, DedupeMismatch, DedupeStoreError, DedupeMissingKey}

// Signature failure reasons (trust.Reason* and ReasonReplayed) and policy
// denial reasons (trust.Decision*, and Baton's own), in label order; the last
// of each is "other", for a reason not listed.
var (
	signatureReasons = [...]string{"missing", "malformed", "unknown_key", "bad_signature", "digest_mismatch",
		"expired", "future", "agent_mismatch", "uncovered", ReasonReplayed, "other"}
	denialReasons = [...]string{"no_edge", "unsigned", "not_granted", "uncorrelated", "grant",
		DenialUnknownDestination, DenialDeniedAddress, DenialHopLimit, DenialBadCredential, "other"}
)

// Policy denial reasons Baton itself gives, besides trust's decisions.
const (
	DenialUnknownDestination = "unknown_destination" // neither a peer nor in external.allow
	DenialDeniedAddress      = "denied_address"      // an address the guard refuses
	DenialHopLimit           = "hop_limit"           // beyond the edge's max_hops
)

func reasonIndex(list []string, r string) int {
	for i, v := range list[:len(list)-1] {
		if v == r {
			return i
		}
	}
	return len(list) - 1
}

// Contract violation kinds, in label order; the last is "other".
var violationKinds = [...]handoff.Kind{handoff.KindSchema, handoff.KindRequired, handoff.KindCompleteness,
	handoff.KindSize, handoff.KindVersion, handoff.KindIdentity, "other"}

func kindIndex(k handoff.Kind) int {
	for i, v := range violationKinds[:len(violationKinds)-1] {
		if v == k {
			return i
		}
	}
	return len(violationKinds) - 1
}

// Breaker states as the gauge reports them (gobreaker's numbering).
var breakerStates = [3]string{"closed", "half_open", "open"}

// Metrics holds Baton's instruments. A nil *Metrics records nothing: every
// method is safe to call on it.
type Metrics struct {
	meter metric.Meter

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
	stores  atomic.Pointer[[]*StoreSeries]
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

type edgeKey struct {
	side     Side
	from, to string
}

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

// cell is one counter series: its running total and, once it has been
// counted (or started at zero), the options it is observed with.
type cell struct {
	n    atomic.Int64
	opts atomic.Pointer[[]metric.ObserveOption]
}

// add counts n and reports whether the cell's options are built.
func (c *cell) add(n int64) bool {
	c.n.Add(n)
	return c.opts.Load() != nil
}

// observe reports the cell's total when it has been counted.
func (c *cell) observe(o metric.Observer, inst metric.Int64Observable) {
	if p := c.opts.Load(); p != nil {
		o.ObserveInt64(inst, c.n.Load(), *p...)
	}
}

// Edge is one edge's label set with everything built from it: the options
// the instruments take, ready to pass, and the edge's counter totals. Get
// one from Metrics.Edge or Metrics.EdgeOf; a nil *Edge (from a nil Metrics)
// records nothing.
type Edge struct {
	side     Side
	from, to string
	attrs    []attribute.KeyValue // from, to, side
	set      attribute.Set        // of attrs
	rec      []metric.RecordOption
	obs      []metric.ObserveOption
	hists    [nEdgeHists]atomic.Pointer[series] // each built on first use

	requests                                                  [nOutcomes][nClasses]cell
	dedupe                                                    [len(dedupeOutcomes)]cell
	sig                                                       [len(signatureReasons)]cell
	deny                                                      [len(denialReasons)]cell
	violations                                                [3][len(violationKinds)]cell // by handoff.Mode
	transitions                                               [len(breakerStates)]cell
	correlation                                               [len(correlationNames)]cell
	retries, deadLetters, uncorrelated, untrusted, injections cell
}

// label builds the options of c from the edge's labels and extra, once (the
// caller saw them missing).
func (e *Edge) label(c *cell, extra ...attribute.KeyValue) {
	opts := e.obs
	if len(extra) > 0 {
		kvs := make([]attribute.KeyValue, 0, len(e.attrs)+len(extra))
		kvs = append(append(kvs, e.attrs...), extra...)
		opts = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
	}
	c.opts.CompareAndSwap(nil, &opts)
}

func newEdge(side Side, from, to string) *Edge {
	e := &Edge{side: side, from: from, to: to,
		attrs: []attribute.KeyValue{keyFrom.String(from), keyTo.String(to), keySide.String(side.String())}}
	e.set = attribute.NewSet(e.attrs...)
	set := metric.WithAttributeSet(e.set)
	e.rec, e.obs = []metric.RecordOption{set}, []metric.ObserveOption{set}
	return e
}

// onEdge returns e's series of the i-th edge histogram.
func (m *Metrics) onEdge(e *Edge, i int) *series {
	if s := e.hists[i].Load(); s != nil {
		return s
	}
	e.hists[i].CompareAndSwap(nil, m.edgeHists[i].series(e.set, e.rec))
	return e.hists[i].Load()
}

// Edge returns the labels of an edge the configuration names, creating
// them; the proxy calls it at start-up for every configured edge, so that
// the edge's plain counters are exported from zero before the first
// request (rate and increase then see the first one).
func (m *Metrics) Edge(side Side, from, to string) *Edge {
	if m == nil {
		return nil
	}
	e := m.addEdge(edgeKey{side, from, to}, false)
	if side == Egress {
		for _, c := range []*cell{&e.retries, &e.deadLetters, &e.uncorrelated} {
			e.label(c)
		}
	}
	e.label(&e.untrusted)
	e.label(&e.injections)
	return e
}

// addEdge adds the edge under the lock; a dynamic edge past the bound gets
// the side's "_other" labels instead.
func (m *Metrics) addEdge(k edgeKey, dynamic bool) *Edge {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.edges.Load()
	if e := cur[k]; e != nil {
		return e
	}
	if dynamic {
		if m.dynamic >= maxDynamicEdges {
			k.from = LabelOther
			if e := cur[k]; e != nil {
				return e
			}
		} else {
			m.dynamic++
		}
	}
	e := newEdge(k.side, k.from, k.to)
	next := make(map[edgeKey]*Edge, len(cur)+1)
	for key, v := range cur {
		next[key] = v
	}
	next[k] = e
	m.edges.Store(&next)
	return e
}

// EdgeOf returns the labels of the request's edge: at egress from this
// agent to the peer ("_external" for an external fetch, "_unknown" when the
// request was refused before its destination was resolved), at ingress
// from the sender ("_unknown" before HopGuard read it) to this agent.
func (m *Metrics) EdgeOf(in *Info) *Edge {
	if m == nil {
		return nil
	}
	k := edgeKey{side: in.Side}
	if in.Side == Ingress {
		k.from, k.to = in.From, in.Agent
		if k.from == "" {
			k.from = LabelUnknown
		}
	} else {
		k.from = in.Agent
		switch {
		case in.External != "":
			k.to = LabelExternal
		case in.To != "":
			k.to = in.To
		default:
			k.to = LabelUnknown
		}
	}
	if e := (*m.edges.Load())[k]; e != nil {
		return e
	}
	return m.addEdge(k, true)
}

// observeCounters reports every counter total that has been counted.
func (m *Metrics) observeCounters(_ context.Context, o metric.Observer) error {
	for _, e := range *m.edges.Load() {
		for i := range e.requests {
			for j := range e.requests[i] {
				e.requests[i][j].observe(o, m.requests)
			}
		}
		for i := range e.dedupe {
			e.dedupe[i].observe(o, m.dedupe)
		}
		for i := range e.sig {
			e.sig[i].observe(o, m.sigFailures)
		}
		for i := range e.deny {
			e.deny[i].observe(o, m.denials)
		}
		for i := range e.violations {
			for j := range e.violations[i] {
				e.violations[i][j].observe(o, m.violations)
			}
		}
		for i := range e.transitions {
			e.transitions[i].observe(o, m.transitions)
		}
		e.retries.observe(o, m.retries)
		e.deadLetters.observe(o, m.deadLetters)
		e.uncorrelated.observe(o, m.uncorrelated)
		for i := range e.correlation {
			e.correlation[i].observe(o, m.correlation)
		}
		e.untrusted.observe(o, m.untrusted)
		e.injections.observe(o, m.injections)
	}
	for _, s := range *m.stores.Load() {
		s.errs.observe(o, m.storeErrors)
	}
	return nil
}

// Measure returns the middleware that records each request's metrics when
// it ends. A nil m gives a middleware that does nothing.
func Measure(m *Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if m == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer m.ended(r)
			next.ServeHTTP(w, r)
		})
	}
}

func (m *Metrics) ended(r *http.Request) {
	if in := InfoFromContext(r.Context()); in != nil {
		m.request(r.Method, in, time.Since(in.Start))
	}
}

// outcomeOf tells what became of the request.
func outcomeOf(in *Info) outcome {
	switch {
	case in.Dedupe == DedupeReplayed:
		return outcomeReplayed
	case in.DeadLetter != "":
		return outcomeDeadLettered
	case !in.Delivered, in.PolicyDenial != "":
		return outcomeRefused
	case in.Err != nil || in.Status() == 0:
		return outcomeFailed
	}
	return outcomeDelivered
}

// request records everything a finished request tells.
func (m *Metrics) request(method string, in *Info, d time.Duration) {
	e := m.EdgeOf(in)
	status := in.Status()
	secs := d.Seconds()
	m.onEdge(e, edgeDuration).record(secs)
	if int(in.Side) < len(m.server) && m.server[in.Side] != nil {
		m.server[in.Side].point(method, status).record(secs)
	}
	o, cl := outcomeOf(in), classOf(status)
	if c := &e.requests[o][cl]; !c.add(1) {
		e.label(c, keyOutcome.String(outcomeNames[o]), keyStatusClass.String(classNames[cl]))
	}
	if in.Hop > 0 && in.Handoff() {
		m.onEdge(e, edgeHops).recordInt(int64(in.Hop))
	}
	if in.Contract != nil {
		m.contract(e, in)
	}
	if in.Dedupe != "" {
		for i, v := range dedupeOutcomes {
			if v == in.Dedupe {
				if c := &e.dedupe[i]; !c.add(1) {
					e.label(c, keyOutcome.String(string(v)))
				}
			}
		}
	}
	if in.SignatureFailure != "" {
		i := reasonIndex(signatureReasons[:], in.SignatureFailure)
		if c := &e.sig[i]; !c.add(1) {
			e.label(c, keyReason.String(signatureReasons[i]))
		}
	}
	if in.PolicyDenial != "" {
		i := reasonIndex(denialReasons[:], in.PolicyDenial)
		if c := &e.deny[i]; !c.add(1) {
			e.label(c, keyReason.String(denialReasons[i]))
		}
	}
	if in.Labels != nil || in.Injection != nil {
		n := 0
		if in.Labels != nil {
			n = len(in.Labels.Spans)
		}
		m.Untrusted(e, n, in.Injection != nil)
	}
	if in.Side == Egress && in.Handoff() && in.To != "" && in.Compensation == nil {
		e.countCorrelation(in)
		if in.Uncorrelated && !e.uncorrelated.add(1) {
			e.label(&e.uncorrelated)
		}
	}
}

func (m *Metrics) contract(e *Edge, in *Info) {
	res, pol := in.Contract, in.ContractPolicy
	m.onEdge(e, edgeCompleteness).record(res.Completeness)
	size := len(res.Envelope)
	m.onEdge(e, edgeEnvSize).recordInt(int64(size))
	if pol.MaxBytes > 0 {
		m.onEdge(e, edgeEnvRatio).record(float64(size) / float64(pol.MaxBytes))
	}
	mode := int(pol.Mode)
	if mode >= len(e.violations) {
		return
	}
	for _, v := range res.Violations {
		k := kindIndex(v.Kind)
		if c := &e.violations[mode][k]; !c.add(1) {
			e.label(c, keyMode.String(pol.Mode.String()), keyKind.String(string(violationKinds[k])))
		}
	}
}

// Retries counts tries after the first on an egress edge.
func (m *Metrics) Retries(e *Edge, n int) {
	if m == nil || e == nil || n <= 0 {
		return
	}
	if !e.retries.add(int64(n)) {
		e.label(&e.retries)
	}
}

// DeadLetter counts a handoff dead-lettered on an egress edge.
func (m *Metrics) DeadLetter(e *Edge) {
	if m == nil || e == nil {
		return
	}
	if !e.deadLetters.add(1) {
		e.label(&e.deadLetters)
	}
}

// BreakerTransition counts the breaker of an egress edge entering state (0
// closed, 1 half-open, 2 open).
func (m *Metrics) BreakerTransition(e *Edge, state int) {
	if m == nil || e == nil || state < 0 || state >= len(breakerStates) {
		return
	}
	if c := &e.transitions[state]; !c.add(1) {
		e.label(c, keyState.String(breakerStates[state]))
	}
}

// Untrusted counts, on the request's edge (EdgeOf), the untrusted-content
// labels attached to a handoff and whether its content was flagged as a
// likely prompt injection. The untrusted-content tracking calls it once
// per handoff it labels.
func (m *Metrics) Untrusted(e *Edge, labelled int, flagged bool) {
	if m == nil || e == nil {
		return
	}
	if labelled > 0 && !e.untrusted.add(int64(labelled)) {
		e.label(&e.untrusted)
	}
	if flagged && !e.injections.add(1) {
		e.label(&e.injections)
	}
}

// Gauges is what an Observe callback reports the egress edges' state
// through.
type Gauges struct {
	o metric.Observer
	m *Metrics
}

// Breaker reports the breaker state of an edge (0 closed, 1 half-open, 2
// open).
func (g Gauges) Breaker(e *Edge, state int64) { g.o.ObserveInt64(g.m.breakerState, state, e.obs...) }

// RetryBudget reports the retries an edge's budget still allows, and that
// as a share of what it allows in all.
func (g Gauges) RetryBudget(e *Edge, remaining, share float64) {
	g.o.ObserveFloat64(g.m.budgetRemaining, remaining, e.obs...)
	g.o.ObserveFloat64(g.m.budgetShare, share, e.obs...)
}

// DeadLetters reports the dead letters waiting on an edge.
func (g Gauges) DeadLetters(e *Edge, depth int64) {
	g.o.ObserveInt64(g.m.deadLetterDepth, depth, e.obs...)
}

// Observe registers fn to report the gauges each time metrics are
// collected; stop unregisters it.
func (m *Metrics) Observe(fn func(ctx context.Context, g Gauges)) (stop func(), err error) {
	if m == nil {
		return func() {}, nil
	}
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		fn(ctx, Gauges{o: o, m: m})
		return nil
	}, m.breakerState, m.budgetRemaining, m.budgetShare, m.deadLetterDepth)
	if err != nil {
		return nil, err
	}
	return func() { _ = reg.Unregister() }, nil
}

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

// HTTPSeries is an HTTP duration instrument's labels for one server (a
// listener side) or one client destination: method and status code on top,
// each combination built on first use.
type HTTPSeries struct {
	h      *histogram
	client bool
	base   []attribute.KeyValue
	rows   [len(httpMethods) + 1]atomic.Pointer[statusRow]
}

// statusRow holds the series of one method by status: index 0 is no
// status (a transport error), 1 to 500 are 100 to 599.
type statusRow [501]atomic.Pointer[series]

// httpMethods are the methods labelled by name; any other is "_OTHER", as
// the HTTP semantic conventions say.
var httpMethods = [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace}

func methodIndex(m string) int {
	for i, v := range httpMethods {
		if v == m {
			return i
		}
	}
	return len(httpMethods)
}

// Client returns the series of HTTP client requests to server, which must
// be bounded (a peer's name, the local agent's host); "" leaves
// server.address out.
func (m *Metrics) Client(server string) *HTTPSeries {
	if m == nil {
		return nil
	}
	s := &HTTPSeries{h: m.clientTime, client: true}
	if server != "" {
		s.base = []attribute.KeyValue{keyServer.String(server)}
	}
	return s
}

// Record records one client request that took d; status 0 means it failed
// without a response.
func (s *HTTPSeries) Record(method string, status int, d time.Duration) {
	if s == nil {
		return
	}
	s.point(method, status).record(d.Seconds())
}

// point returns the series of method and status.
func (s *HTTPSeries) point(method string, status int) *series {
	mi, si := methodIndex(method), 0
	if status >= 100 && status <= 599 {
		si = status - 99
	}
	row := s.rows[mi].Load()
	if row == nil {
		s.rows[mi].CompareAndSwap(nil, new(statusRow))
		row = s.rows[mi].Load()
	}
	if p := row[si].Load(); p != nil {
		return p
	}
	return s.build(row, mi, si)
}

func (s *HTTPSeries) build(row *statusRow, mi, si int) *series {
	kvs := append(make([]attribute.KeyValue, 0, len(s.base)+3), s.base...)
	method := "_OTHER"
	if mi < len(httpMethods) {
		method = httpMethods[mi]
	}
	kvs = append(kvs, keyMethod.String(method))
	switch status := si + 99; {
	case si == 0:
		kvs = append(kvs, keyErrorType.String("_OTHER"))
	case status >= 500 || (s.client && status >= 400):
		kvs = append(kvs, keyStatus.Int(status), keyErrorType.String(strconv.Itoa(status)))
	default:
		kvs = append(kvs, keyStatus.Int(status))
	}
	set := attribute.NewSet(kvs...)
	p := s.h.series(set, []metric.RecordOption{metric.WithAttributeSet(set)})
	if !row[si].CompareAndSwap(nil, p) {
		return row[si].Load()
	}
	return p
}
