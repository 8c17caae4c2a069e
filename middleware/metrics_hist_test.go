package middleware

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/batonproxy/baton/handoff"
)

// produceOne returns the single point Produce gives for h.
func produceOne[N int64 | float64](t *testing.T, hs *Histograms, name string) metricdata.HistogramDataPoint[N] {
	t.Helper()
	sms, err := hs.Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range sms {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[N])
			if !ok || len(h.DataPoints) != 1 {
				t.Fatalf("%s: %#v, want one %T point", name, m.Data, h)
			}
			return h.DataPoints[0]
		}
	}
	t.Fatalf("%s not produced", name)
	return metricdata.HistogramDataPoint[N]{}
}

func TestHistogramBuckets(t *testing.T) {
	t.Parallel()
	// Every bound, and the floats either side of it: a bound belongs to the
	// bucket it closes (le), as sort.SearchFloat64s places it for the SDK.
	var values []float64
	for _, b := range durationBuckets {
		values = append(values, math.Nextafter(b, math.Inf(-1)), b, math.Nextafter(b, math.Inf(1)))
	}
	values = append(values, -1, 0, 1e9, math.Inf(1), math.Inf(-1), math.NaN())
	for _, v := range values {
		if got, want := bucket(durationBuckets, v), sort.SearchFloat64s(durationBuckets, v); got != want {
			t.Errorf("bucket(%v) = %d, want %d", v, got, want)
		}
	}
	if got := bucket(durationBuckets, 0.005); durationBuckets[got] != 0.005 {
		t.Errorf("0.005 in the bucket up to %v", durationBuckets[got])
	}
	if got := bucket(nil, 1); got != 0 {
		t.Errorf("no bounds: bucket %d", got)
	}

	hs := NewHistograms()
	f := hs.instrument("f", "s", "", []float64{1, 2, 5}, false).series(attribute.NewSet(), nil)
	for _, v := range []float64{-3, 1, 1.5, 2, 2.0000001, 5, 5.5, 1e300} {
		f.record(v)
	}
	dp := produceOne[float64](t, hs, "f")
	if got, want := dp.BucketCounts, []uint64{2, 2, 2, 2}; !equalCounts(got, want) || dp.Count != 8 {
		t.Errorf("float buckets %v count %d, want %v and 8", got, dp.Count, want)
	}
	if lo, _ := dp.Min.Value(); lo != -3 {
		t.Errorf("min %v, want -3", lo)
	}
	if hi, _ := dp.Max.Value(); hi != 1e300 {
		t.Errorf("max %v, want 1e300", hi)
	}

	n := hs.instrument("n", "{hop}", "", hopBuckets, true).series(attribute.NewSet(), nil)
	for v := int64(0); v <= 40; v++ {
		n.recordInt(v)
	}
	ip := produceOne[int64](t, hs, "n")
	// 0 and 1 up to 1; 2 to 6 one each; then two per bucket up to 12, four
	// up to 16, eight to 24 and to 32, eight above.
	want := []uint64{2, 1, 1, 1, 1, 1, 2, 2, 2, 4, 8, 8, 8}
	if !equalCounts(ip.BucketCounts, want) || ip.Count != 41 || ip.Sum != 820 {
		t.Errorf("int buckets %v count %d sum %d, want %v, 41 and 820", ip.BucketCounts, ip.Count, ip.Sum, want)
	}
	if lo, _ := ip.Min.Value(); lo != 0 {
		t.Errorf("int min %d", lo)
	}
	if hi, _ := ip.Max.Value(); hi != 40 {
		t.Errorf("int max %d", hi)
	}
}

func equalCounts(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHistogramConcurrent records from many goroutines while two readers
// take snapshots: every snapshot's count is the sum of its buckets, nothing
// goes backwards, and the end result is exact.
func TestHistogramConcurrent(t *testing.T) {
	t.Parallel()
	const workers, each = 16, 2000
	hs := NewHistograms()
	h := hs.instrument("c", "s", "", []float64{0.25, 0.5, 1, 2}, false)
	set := attribute.NewSet(keyOp.String("get"))
	// Quarters and whole numbers: every partial sum is exact, so the total
	// does not depend on the order of addition.
	values := []float64{0, 0.25, 0.5, 0.75, 1, 1.25, 2, 3}

	stop := make(chan struct{})
	var snaps sync.WaitGroup
	snapshots := func() {
		defer snaps.Done()
		var last []uint64
		var lastSum float64
		for {
			select {
			case <-stop:
				return
			default:
			}
			sms, err := hs.Produce(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			for _, sm := range sms {
				for _, dp := range sm.Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints {
					var n uint64
					for i, c := range dp.BucketCounts {
						n += c
						if last != nil && c < last[i] {
							t.Errorf("bucket %d went from %d to %d", i, last[i], c)
						}
					}
					if n != dp.Count {
						t.Errorf("count %d, buckets add up to %d", dp.Count, n)
					}
					lo, _ := dp.Min.Value()
					hi, _ := dp.Max.Value()
					if lo < 0 || hi > 3 || lo > hi {
						t.Errorf("min %v max %v", lo, hi)
					}
					if dp.Sum < lastSum {
						t.Errorf("sum went from %v to %v", lastSum, dp.Sum)
					}
					last, lastSum = dp.BucketCounts, dp.Sum
				}
			}
		}
	}
	snaps.Add(2)
	go snapshots()
	go snapshots()

	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each goroutine finds the series itself, as racing requests do.
			s := h.series(set, nil)
			for i := range each {
				s.record(values[(w+i)%len(values)])
			}
		}()
	}
	wg.Wait()
	close(stop)
	snaps.Wait()

	dp := produceOne[float64](t, hs, "c")
	var sum float64
	for _, v := range values {
		sum += v
	}
	sum *= workers * each / float64(len(values))
	per := uint64(workers * each / len(values))
	// 0, 0.25 | 0.5 | 0.75, 1 | 1.25, 2 | 3
	want := []uint64{2 * per, per, 2 * per, 2 * per, per}
	if dp.Count != workers*each || dp.Sum != sum || !equalCounts(dp.BucketCounts, want) {
		t.Errorf("count %d sum %v buckets %v, want %d, %v, %v", dp.Count, dp.Sum, dp.BucketCounts, workers*each, sum, want)
	}
	if lo, _ := dp.Min.Value(); lo != 0 {
		t.Errorf("min %v", lo)
	}
	if hi, _ := dp.Max.Value(); hi != 3 {
		t.Errorf("max %v", hi)
	}
}

// twin is the same measurements on two providers: Baton's histograms
// produced for one, the SDK's on the other.
type twin struct {
	own, sdk *Metrics
}

func (tw twin) each(fn func(m *Metrics)) {
	fn(tw.own)
	fn(tw.sdk)
}

// bigEnvelope is an envelope past the last size bucket.
var bigEnvelope = sync.OnceValue(func() []byte { return make([]byte, 16<<20+1) })

// driveMetrics records a spread of values into every histogram: bounds
// exactly, values either side, past the last bound, sums that round.
func driveMetrics(m *Metrics) {
	m.Edge(Egress, "analyst", "summarizer")
	big := bigEnvelope()
	durs := []time.Duration{0, 500 * time.Microsecond, 3 * time.Millisecond, 5 * time.Millisecond,
		5*time.Millisecond + 1, 100 * time.Millisecond, time.Second, 10 * time.Minute, time.Hour, 1}
	comp := []float64{0, 0.25, 0.3, 1, 0.1}
	sizes := []int{0, 256, 257, 64 << 10, 16<<20 + 1, 1000, 3000}
	hops := []int{1, 2, 12, 13, 32, 33, 100, 3}
	statuses := []int{200, 201, 404, 503, 0}
	methods := []string{http.MethodPost, http.MethodGet, "BREW"}
	for i, d := range durs {
		status, method := statuses[i%len(statuses)], methods[i%len(methods)]
		res := &handoff.Result{Completeness: comp[i%len(comp)], Envelope: big[:sizes[i%len(sizes)]]}
		pol := handoff.Policy{Mode: handoff.Observe, MaxBytes: 1000 * (i % 3)}
		m.request(method, &Info{Side: Egress, Agent: "analyst", To: "summarizer", Hop: hops[i%len(hops)],
			Delivered: true, Contract: res, ContractPolicy: pol, rec: &recorder{status: status}}, d)
		m.request(method, &Info{Side: Ingress, Agent: "summarizer", From: "analyst", Hop: hops[(i+3)%len(hops)],
			Delivered: true, Contract: res, ContractPolicy: pol, rec: &recorder{status: status}}, d/3)
		m.request(method, &Info{Side: Egress, Agent: "analyst", External: "api.example.com:443",
			rec: &recorder{status: status}}, d*7)
		m.Client("summarizer").Record(method, status, d)
		m.Client("").Record(method, status, d/7)
		m.Store("get").done(d/10, nil)
		m.Store("claim_many").done(d/3, nil)
	}
}

// newTwin builds the twin: own's reader, from readers, takes the
// Histograms; sdk's is as a provider without them has it (p nil). opts set
// up both providers.
func newTwin(t *testing.T, limit int, readers func(p *Histograms) sdkmetric.Reader, opts ...sdkmetric.Option) twin {
	t.Helper()
	build := func(hs *Histograms) *Metrics {
		mp := sdkmetric.NewMeterProvider(append(slices.Clip(opts), sdkmetric.WithReader(readers(hs)))...)
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		m, err := NewMetrics(WithHistograms(mp, hs))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	hs := NewHistograms()
	hs.limit = limit
	return twin{own: build(hs), sdk: build(nil)}
}

// byName collects r and returns every metric by name, checking the scope.
func byName(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != meterName || sm.Scope.Version != "" || sm.Scope.SchemaURL != "" || sm.Scope.Attributes.Len() != 0 {
			t.Errorf("scope %+v", sm.Scope)
		}
		for _, m := range sm.Metrics {
			if _, dup := out[m.Name]; dup {
				t.Errorf("%s produced twice", m.Name)
			}
			out[m.Name] = m
		}
	}
	return out
}

// TestHistogramsMatchSDK checks that Baton's histograms produce what the
// SDK's instruments aggregate from the same measurements: names, units,
// descriptions, attributes, temporality, bounds, bucket counts, count, sum,
// min and max, and the same overflow series past the cardinality limit.
func TestHistogramsMatchSDK(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{2000, 4} {
		var readers [2]*sdkmetric.ManualReader
		tw := newTwin(t, limit, func(p *Histograms) sdkmetric.Reader {
			if p == nil {
				readers[1] = sdkmetric.NewManualReader()
				return readers[1]
			}
			readers[0] = sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
			return readers[0]
		}, sdkmetric.WithCardinalityLimit(limit))
		tw.each(driveMetrics)
		for round := range 3 { // cumulative: later collections add up
			own, sdk := byName(t, readers[0]), byName(t, readers[1])
			names := []string{"baton.handoff.duration", "baton.handoff.hops", "baton.contract.completeness",
				"baton.envelope.size", "baton.envelope.size_ratio", "baton.store.duration",
				"http.server.request.duration", "http.client.request.duration"}
			for _, name := range names {
				want, ok := sdk[name]
				if !ok {
					t.Fatalf("the SDK produced no %s", name)
				}
				metricdatatest.AssertEqual(t, want, own[name], metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
			}
			if len(own) != len(sdk) {
				t.Errorf("limit %d round %d: %d metrics, the SDK %d", limit, round, len(own), len(sdk))
			}
			tw.each(driveMetrics)
		}
		if limit == 4 {
			over, _ := hist(byName(t, readers[0])["http.server.request.duration"].Data, map[string]string{"otel.metric.overflow": "true"})
			if over == 0 {
				t.Error("no overflow series past the limit")
			}
		}
	}
}

// TestHistogramsStartTime checks that a series starts when its instrument
// was created, as the SDK's cumulative histograms do, and is stamped with
// the time of the collection.
func TestHistogramsStartTime(t *testing.T) {
	t.Parallel()
	before := time.Now()
	hs := NewHistograms()
	h := hs.instrument("s", "s", "", storeBuckets, false)
	after := time.Now()
	time.Sleep(time.Millisecond)
	h.series(attribute.NewSet(), nil).record(1)
	dp := produceOne[float64](t, hs, "s")
	if dp.StartTime.Before(before) || dp.StartTime.After(after) {
		t.Errorf("start %v, want between %v and %v", dp.StartTime, before, after)
	}
	if !dp.Time.After(after) {
		t.Errorf("time %v, not after the series was recorded", dp.Time)
	}
	if sms, err := NewHistograms().Produce(context.Background()); sms != nil || err != nil {
		t.Errorf("nothing recorded: %v, %v", sms, err)
	}
}

// TestHistogramsPrometheus checks that /metrics serves Baton's histograms
// exactly as it served the SDK's, with and without scope labels.
func TestHistogramsPrometheus(t *testing.T) {
	t.Parallel()
	for _, opts := range [][]otelprom.Option{{otelprom.WithoutScopeInfo()}, nil} {
		var handlers [2]http.Handler
		tw := newTwin(t, 2000, func(p *Histograms) sdkmetric.Reader {
			reg := prometheus.NewRegistry()
			o := append([]otelprom.Option{otelprom.WithRegisterer(reg)}, opts...)
			i := 1
			if p != nil {
				o, i = append(o, otelprom.WithProducer(p)), 0
			}
			exp, err := otelprom.New(o...)
			if err != nil {
				t.Fatal(err)
			}
			handlers[i] = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			return exp
		})
		tw.each(driveMetrics)
		scrape := func(h http.Handler) string {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if w.Code != http.StatusOK {
				t.Fatalf("GET /metrics: %d", w.Code)
			}
			return w.Body.String()
		}
		own, sdk := scrape(handlers[0]), scrape(handlers[1])
		if own != sdk {
			t.Errorf("/metrics differs (scope options %d):\n--- Baton's histograms\n%s\n--- the SDK's\n%s", len(opts), own, sdk)
		}
		for _, want := range []string{
			`baton_handoff_duration_seconds_bucket{from="analyst",`,
			`,le="0.005"} `,
			`http_server_request_duration_seconds_bucket{`,
			`baton_envelope_size_bytes_sum{`,
		} {
			if !strings.Contains(own, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	}
}

// TestWithHistograms checks what the wrapper does with nothing to wrap.
func TestWithHistograms(t *testing.T) {
	t.Parallel()
	if mp := WithHistograms(nil, NewHistograms()); mp != nil {
		t.Errorf("WithHistograms(nil) = %v", mp)
	}
	if m, err := NewMetrics(WithHistograms(nil, NewHistograms())); m != nil || err != nil {
		t.Errorf("NewMetrics(WithHistograms(nil)) = %v, %v", m, err)
	}
	mp := sdkmetric.NewMeterProvider()
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	if got := WithHistograms(mp, nil); got != mp {
		t.Errorf("WithHistograms(mp, nil) = %v", got)
	}
	// Two Metrics on one provider record into the same series, as two on
	// an SDK provider would.
	hs := NewHistograms()
	wrapped := WithHistograms(mp, hs)
	a, _ := NewMetrics(wrapped)
	b, _ := NewMetrics(wrapped)
	a.Store("get").done(time.Millisecond, nil)
	b.Store("get").done(time.Millisecond, nil)
	if dp := produceOne[float64](t, hs, "baton.store.duration"); dp.Count != 2 {
		t.Errorf("two Metrics: count %d, want 2 in one series", dp.Count)
	}
}
