package middleware

// Baton's own histograms. The SDK's Record costs most of a microsecond in
// option processing and an attribute-set lookup, and a request records
// several; here a request's series is found once and cached beside its
// attribute set, as the counters' are, and a measurement is a handful of
// atomic operations. Histograms exports the series through the readers'
// Producer hook as the SDK would have exported them: the same names,
// buckets, attributes and scope, cumulative, with sum, min and max computed
// the way the SDK computes them.
//
// A provider without a Histograms (one that NewMetrics is given directly)
// keeps the SDK's instruments, with the same cached series: nothing else
// could export the histograms to its readers.

import (
	"context"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// meterName is the instrumentation scope of every Baton instrument.
const meterName = "github.com/batonproxy/baton"

// Histograms holds the request-path histograms of the Metrics built on a
// provider from WithHistograms, and produces them for that provider's
// readers. It is an sdkmetric.Producer: give it to every reader of the
// provider (sdkmetric.WithProducer, or the Prometheus exporter's
// WithProducer), or its histograms are not exported. It suits readers that
// would aggregate histograms as explicit-bucket histograms with min and max,
// cumulatively: the SDK's defaults.
type Histograms struct {
	limit int // series per instrument, as the SDK's cardinality limit; 0 or less: none

	mu    sync.Mutex
	insts []*histogram

	producing sync.Mutex // serialises Produce, which folds float sums
}

// NewHistograms returns an empty Histograms.
func NewHistograms() *Histograms {
	return &Histograms{limit: cardinalityLimit()}
}

// cardinalityLimit is the SDK's default limit of series per instrument,
// read from the environment as the SDK reads it, so that an instrument
// overflows where it would have.
func cardinalityLimit() int {
	const def = 2000
	v := strings.TrimSpace(os.Getenv("OTEL_GO_X_CARDINALITY_LIMIT"))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return def
	}
	return n
}

// perSeriesStart tells whether the SDK would give each series its own start
// time (an experimental SDK feature) rather than the instrument's.
func perSeriesStart() bool {
	return strings.EqualFold(os.Getenv("OTEL_GO_X_PER_SERIES_START_TIMESTAMPS"), "true")
}

// overflowSet is where a series past the cardinality limit is recorded, as
// the SDK names it.
var overflowSet = attribute.NewSet(attribute.Bool("otel.metric.overflow", true))

// histProvider is a MeterProvider whose Metrics record histograms into h.
type histProvider struct {
	metric.MeterProvider
	h *Histograms
}

// WithHistograms returns mp carrying h: NewMetrics on the result records
// its histograms into h, and its other instruments into mp. A nil h gives mp.
func WithHistograms(mp metric.MeterProvider, h *Histograms) metric.MeterProvider {
	if mp == nil || h == nil {
		return mp
	}
	return &histProvider{MeterProvider: mp, h: h}
}

// instrument returns the instrument called name, creating it; a second
// Metrics on the same provider records into the same one, as with the SDK.
func (hs *Histograms) instrument(name, unit, desc string, bounds []float64, isInt bool) *histogram {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, h := range hs.insts {
		if h.name == name {
			return h
		}
	}
	h := &histogram{name: name, unit: unit, desc: desc, bounds: slices.Clone(bounds), isInt: isInt,
		own: true, start: time.Now(), limit: hs.limit, byAttrs: map[attribute.Distinct]*series{}}
	hs.insts = append(hs.insts, h)
	return h
}

// Produce returns a snapshot of every series recorded so far, as the SDK's
// cumulative explicit-bucket histograms. It runs beside recording: each
// point's count is the sum of the bucket counts it read, and its sum, min
// and max, read after the buckets, include at least the measurements
// counted (and perhaps one still being recorded).
func (hs *Histograms) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	hs.producing.Lock()
	defer hs.producing.Unlock()
	hs.mu.Lock()
	insts := hs.insts
	hs.mu.Unlock()
	now, perSeries := time.Now(), perSeriesStart()
	var out []metricdata.Metrics
	for _, h := range insts {
		if m, ok := h.produce(now, perSeries); ok {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: meterName}, Metrics: out}}, nil
}

// histogram is one histogram instrument of the request path: Baton's own
// (own) or the SDK's (f64 or i64).
type histogram struct {
	name, unit, desc string
	bounds           []float64
	isInt            bool

	own     bool
	start   time.Time
	limit   int
	mu      sync.Mutex // serialises adding series
	byAttrs map[attribute.Distinct]*series
	list    []*series // in creation order; append-only

	f64 metric.Float64Histogram
	i64 metric.Int64Histogram
}

// series returns the series of set, creating it; opts are set's options,
// for the SDK's instrument. Callers cache what it returns: it takes a lock.
func (h *histogram) series(set attribute.Set, opts []metric.RecordOption) *series {
	if !h.own {
		return &series{h: h, opts: opts}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.byAttrs[set.Equivalent()]; s != nil {
		return s
	}
	if h.limit > 0 && len(h.byAttrs) >= h.limit-1 {
		if s := h.byAttrs[overflowSet.Equivalent()]; s != nil {
			return s
		}
		set = overflowSet
	}
	s := &series{h: h, attrs: set, start: time.Now(), counts: make([]atomic.Uint64, len(h.bounds)+1)}
	if h.isInt {
		s.min.Store(uint64(math.MaxInt64))
		minInt := int64(math.MinInt64)
		s.max.Store(uint64(minInt))
	} else {
		s.min.Store(math.Float64bits(math.Inf(1)))
		s.max.Store(math.Float64bits(math.Inf(-1)))
	}
	h.byAttrs[set.Equivalent()] = s
	h.list = append(h.list, s)
	return s
}

// series is one attribute set of one histogram, where a request records.
// With Baton's own histograms it holds the counts; otherwise the options
// to record into the SDK's instrument with.
type series struct {
	h     *histogram
	attrs attribute.Set
	start time.Time

	counts []atomic.Uint64 // by bucket, the last above every bound; nil: the SDK's
	// The sum as the SDK keeps it: whole-number measurements (every one of
	// an int64 histogram) added exactly, the others apart as float64 bits.
	whole atomic.Int64
	frac  atomic.Uint64
	// float64 bits, or an int64 for an int64 histogram.
	min, max atomic.Uint64

	opts []metric.RecordOption
}

// bucket returns the index of the bucket v belongs to: the first bound at
// or above it (buckets include their upper bound), len(bounds) above all
// of them or for NaN, as sort.SearchFloat64s finds it for the SDK.
func bucket(bounds []float64, v float64) int {
	lo, hi := 0, len(bounds)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if bounds[mid] >= v {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// record records v into a float64 histogram. The bucket is counted last,
// so that a snapshot that sees the count sees the sum, min and max too.
func (s *series) record(v float64) {
	if s.counts == nil {
		// Background: no span, so the exemplar filter has nothing to sample.
		s.h.f64.Record(context.Background(), v, s.opts...)
		return
	}
	s.add(v)
	for old := s.min.Load(); v < math.Float64frombits(old); old = s.min.Load() {
		if s.min.CompareAndSwap(old, math.Float64bits(v)) {
			break
		}
	}
	for old := s.max.Load(); v > math.Float64frombits(old); old = s.max.Load() {
		if s.max.CompareAndSwap(old, math.Float64bits(v)) {
			break
		}
	}
	s.counts[bucket(s.h.bounds, v)].Add(1)
}

// add adds v to the sum as the SDK does: a whole number exactly, anything
// else to the float part.
func (s *series) add(v float64) {
	if w := int64(v); float64(w) == v {
		s.whole.Add(w)
		return
	}
	for {
		old := s.frac.Load()
		if s.frac.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// fold returns the float sum and starts it again from that value. The SDK's
// cumulative histogram does the same at each collection (it reads its sum
// and adds it back, in one piece, into the counters it goes on recording
// into), which rounds later sums differently than one running total would:
// folded alike, the sums are the SDK's to the bit, for a provider with one
// reader. Measurements recorded meanwhile land before or after the swaps,
// in this sum or the next; Produce's lock keeps another fold out.
func (s *series) fold() float64 {
	w := s.whole.Swap(0)
	f := math.Float64frombits(s.frac.Swap(0))
	sum := f + float64(w)
	s.add(sum)
	return sum
}

// recordInt records v into an int64 histogram, as record does.
func (s *series) recordInt(v int64) {
	if s.counts == nil {
		s.h.i64.Record(context.Background(), v, s.opts...)
		return
	}
	s.whole.Add(v)
	for old := s.min.Load(); v < int64(old); old = s.min.Load() {
		if s.min.CompareAndSwap(old, uint64(v)) {
			break
		}
	}
	for old := s.max.Load(); v > int64(old); old = s.max.Load() {
		if s.max.CompareAndSwap(old, uint64(v)) {
			break
		}
	}
	s.counts[bucket(s.h.bounds, float64(v))].Add(1)
}

// produce returns the instrument's recorded series; false when none has
// been recorded, as the SDK leaves such an instrument out.
func (h *histogram) produce(now time.Time, perSeries bool) (metricdata.Metrics, bool) {
	h.mu.Lock()
	list := h.list
	h.mu.Unlock()
	m := metricdata.Metrics{Name: h.name, Description: h.desc, Unit: h.unit}
	if h.isInt {
		dps := points(h, list, now, perSeries, func(s *series) (sum, lo, hi int64) {
			return s.whole.Load(), int64(s.min.Load()), int64(s.max.Load())
		})
		m.Data = metricdata.Histogram[int64]{DataPoints: dps, Temporality: metricdata.CumulativeTemporality}
		return m, len(dps) > 0
	}
	dps := points(h, list, now, perSeries, func(s *series) (sum, lo, hi float64) {
		return s.fold(), math.Float64frombits(s.min.Load()), math.Float64frombits(s.max.Load())
	})
	m.Data = metricdata.Histogram[float64]{DataPoints: dps, Temporality: metricdata.CumulativeTemporality}
	return m, len(dps) > 0
}

// points snapshots the series that have counted a measurement: buckets
// first, then (through read) sum, min and max.
func points[N int64 | float64](h *histogram, list []*series, now time.Time, perSeries bool,
	read func(*series) (sum, lo, hi N)) []metricdata.HistogramDataPoint[N] {
	bounds := slices.Clone(h.bounds)
	var dps []metricdata.HistogramDataPoint[N]
	for _, s := range list {
		counts := make([]uint64, len(s.counts))
		var n uint64
		for i := range s.counts {
			counts[i] = s.counts[i].Load()
			n += counts[i]
		}
		if n == 0 {
			continue
		}
		sum, lo, hi := read(s)
		start := h.start
		if perSeries {
			start = s.start
		}
		dps = append(dps, metricdata.HistogramDataPoint[N]{
			Attributes: s.attrs, StartTime: start, Time: now,
			Count: n, Bounds: bounds, BucketCounts: counts,
			Min: metricdata.NewExtrema(lo), Max: metricdata.NewExtrema(hi), Sum: sum,
		})
	}
	return dps
}
