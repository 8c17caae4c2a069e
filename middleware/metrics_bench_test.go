package middleware

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonproxy/baton/handoff"
)

// benchMetrics returns Metrics on a real SDK provider set up as baton serve
// sets it up (a reader that also takes Baton's histograms, so that every
// instrument aggregates; exemplars off), and the configured edges' labels.
// With sdk, the provider has no Histograms and the SDK records histograms.
func benchMetrics(b *testing.B, sdk bool) (*Metrics, *Edge) {
	b.Helper()
	hist := NewHistograms()
	if sdk {
		hist = nil
	}
	var ropts []sdkmetric.ManualReaderOption
	if hist != nil {
		ropts = append(ropts, sdkmetric.WithProducer(hist))
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader(ropts...)),
		sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := NewMetrics(WithHistograms(mp, hist))
	if err != nil {
		b.Fatal(err)
	}
	e := m.Edge(Egress, "analyst", "summarizer")
	m.Edge(Ingress, "analyst", "summarizer")
	return m, e
}

// handoffInfos are the Info of one handoff at its sender's egress and its
// receiver's ingress, as the chains leave them: delivered, with an
// envelope checked in observe mode against a max_bytes cap.
func handoffInfos() (out, in *Info) {
	res := &handoff.Result{Completeness: 0.75, Envelope: make([]byte, 3000)}
	pol := handoff.Policy{Mode: handoff.Observe, MaxBytes: 64 << 10}
	out = &Info{Side: Egress, Agent: "analyst", From: "analyst", To: "summarizer", Hop: 2,
		Delivered: true, Contract: res, ContractPolicy: pol, rec: &recorder{status: 200}}
	in = &Info{Side: Ingress, Agent: "summarizer", From: "analyst", To: "summarizer", Hop: 2,
		Delivered: true, Contract: res, ContractPolicy: pol, Dedupe: DedupeClaimed, rec: &recorder{status: 200}}
	return out, in
}

// BenchmarkMetricsPerRequest is everything one request records at one
// Baton, with an envelope checked in observe mode: at the sender's egress
// (the request's duration, outcome, HTTP server duration, hop and contract;
// the HTTP client request to the peer; the store writes of its checkpoint
// and outcome records) and at the receiver's ingress (the same, with the
// dedupe outcome, the client request to the agent, and the store's claim,
// swap and receipt write); then both, for a whole handoff; then each side
// for a handoff without an envelope. Every record
// the path makes is in it, although the record writes are batched by the
// record book's flusher (one store call for many records under load).
func BenchmarkMetricsPerRequest(b *testing.B) { benchPerRequest(b, false) }

// BenchmarkMetricsPerRequestSDK is the same with the SDK's histograms, as
// Metrics on a provider without Histograms records them.
func BenchmarkMetricsPerRequestSDK(b *testing.B) { benchPerRequest(b, true) }

func benchPerRequest(b *testing.B, sdk bool) {
	m, e := benchMetrics(b, sdk)
	out, in := handoffInfos()
	peer, agent := m.Client("summarizer"), m.Client("127.0.0.1")
	chained, claim, swap := m.Store("append_chained"), m.Store("claim_many"), m.Store("swap")
	d := 3 * time.Millisecond
	start := time.Now()
	egress := func() {
		m.request(http.MethodPost, out, d)
		peer.Record(http.MethodPost, 200, d)
		chained.Done(start, nil)
		chained.Done(start, nil)
	}
	ingress := func() {
		m.request(http.MethodPost, in, d)
		agent.Record(http.MethodPost, 200, d)
		claim.Done(start, nil)
		swap.Done(start, nil)
		chained.Done(start, nil)
		m.Untrusted(e, 0, false)
	}
	// The same without an envelope: no contract histograms.
	plainOut, plainIn := *out, *in
	plainOut.Contract, plainIn.Contract = nil, nil
	egressPlain := func() {
		m.request(http.MethodPost, &plainOut, d)
		peer.Record(http.MethodPost, 200, d)
		chained.Done(start, nil)
		chained.Done(start, nil)
	}
	ingressPlain := func() {
		m.request(http.MethodPost, &plainIn, d)
		agent.Record(http.MethodPost, 200, d)
		claim.Done(start, nil)
		swap.Done(start, nil)
		chained.Done(start, nil)
	}
	for _, bc := range []struct {
		name string
		run  func()
	}{
		{"egress", egress},
		{"ingress", ingress},
		{"handoff", func() { egress(); ingress() }},
		{"egress-no-envelope", egressPlain},
		{"ingress-no-envelope", ingressPlain},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				bc.run()
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkMetricsPerRequestParallel is the same with every core
// recording at once, into the same series.
func BenchmarkMetricsPerRequestParallel(b *testing.B) { benchPerRequestParallel(b, false) }

// BenchmarkMetricsPerRequestParallelSDK is that with the SDK's histograms.
func BenchmarkMetricsPerRequestParallelSDK(b *testing.B) { benchPerRequestParallel(b, true) }

func benchPerRequestParallel(b *testing.B, sdk bool) {
	m, _ := benchMetrics(b, sdk)
	peer := m.Client("summarizer")
	d := 3 * time.Millisecond
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		out, in := handoffInfos()
		for pb.Next() {
			m.request(http.MethodPost, out, d)
			peer.Record(http.MethodPost, 200, d)
			m.request(http.MethodPost, in, d)
		}
	})
}

// BenchmarkMetricsRare is the cost of the less common records: a dead
// letter with retries, a refusal by policy, a violation, a store error.
func BenchmarkMetricsRare(b *testing.B) {
	m, e := benchMetrics(b, false)
	refused := &Info{Side: Egress, Agent: "analyst", From: "analyst", To: "summarizer", Hop: 1,
		PolicyDenial: "no_edge", rec: &recorder{status: 403}}
	violated := &Info{Side: Ingress, Agent: "summarizer", From: "analyst", To: "summarizer", Hop: 1,
		Contract:       &handoff.Result{Violations: []handoff.Violation{{Kind: handoff.KindRequired}}},
		ContractPolicy: handoff.Policy{Mode: handoff.Enforce}, SignatureFailure: "expired", rec: &recorder{status: 422}}
	s := m.Store("get")
	errDown := errors.New("down")
	start := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		m.Retries(e, 2)
		m.DeadLetter(e)
		m.BreakerTransition(e, 2)
		m.request(http.MethodPost, refused, time.Millisecond)
		m.request(http.MethodPost, violated, time.Millisecond)
		s.Done(start, errDown)
		m.Untrusted(e, 3, true)
	}
}

// BenchmarkMeasureNil is the middleware without metrics: nothing.
func BenchmarkMeasureNil(b *testing.B) {
	h := Measure(nil)(drain())
	runChain(b, h, benchBody(512, false), http.Header{"Content-Type": {"application/json"}})
}

// cpuTime is the process's CPU time so far. Reported per operation beside
// ns/op, it shows the cost on a machine whose other work steals wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(cpuTime()-since)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkChainMeasured is BenchmarkEgressChain and BenchmarkIngressChain
// (bench_test.go) with Measure after AccessLog, as the proxy builds its
// chains: the difference between them is what metrics cost a request
// through the middlewares.
func BenchmarkChainMeasured(b *testing.B) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	log := benchLogger()
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	m, _ := benchMetrics(b, false)
	book := newMemBook(map[string]inbound{traceID: {hop: 1, record: "r1"}})
	b.Run("egress", func(b *testing.B) {
		h := AccessLog(log, Egress, "analyst")(Measure(m)(Correlate(book)(
			Trace(tp, w3c())(
				benchResolve(
					Identity(
						Limit(1 << 20)(
							IdempotencyKey(newMemBook(nil), 1<<20, false)(drain()))))))))
		runChain(b, h, benchBody(512, false), http.Header{
			"Content-Type": {"application/json"},
			"Traceparent":  {"00-" + traceID + "-00f067aa0ba902b7-01"},
			"Accept":       {"application/json"},
		})
	})
	b.Run("ingress", func(b *testing.B) {
		h := AccessLog(log, Ingress, "summarizer")(Measure(m)(
			Trace(tp, w3c())(
				HopGuard(func(string) int { return 8 })(
					Limit(1 << 20)(drain())))))
		runChain(b, h, benchBody(512, true), http.Header{
			"Content-Type":    {"application/json"},
			"Traceparent":     {"00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"},
			"Baton-Agent":     {"analyst"},
			"Baton-Hop":       {"2"},
			"Idempotency-Key": {`"a2a-0123456789abcdef0123456789abcdef"`},
		})
	})
}

// BenchmarkHistogramRecord is one measurement into one of Baton's own
// series, alone and with every core on the same series.
func BenchmarkHistogramRecord(b *testing.B) {
	h := NewHistograms().instrument("d", "s", "", durationBuckets, false)
	s := h.series(attribute.NewSet(keyOp.String("get")), nil)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.record(0.003)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s.record(0.003)
			}
		})
	})
}

// BenchmarkHistogramsProduce is one collection of the histograms of a
// Baton with a few edges, peers and store operations recorded.
func BenchmarkHistogramsProduce(b *testing.B) {
	hs := NewHistograms()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader(sdkmetric.WithProducer(hs))))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := NewMetrics(WithHistograms(mp, hs))
	if err != nil {
		b.Fatal(err)
	}
	out, in := handoffInfos()
	for _, peer := range []string{"summarizer", "writer", "critic", "planner"} {
		out.To = peer
		m.request(http.MethodPost, out, time.Millisecond)
		m.Client(peer).Record(http.MethodPost, 200, time.Millisecond)
		m.Store("claim_"+peer).Done(time.Now(), nil)
	}
	m.request(http.MethodPost, in, time.Millisecond)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hs.Produce(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
