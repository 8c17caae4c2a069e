package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/batonproxy/baton/middleware"
)

// meters is the process's metrics setup: the provider Baton records into,
// and the /metrics handler when Prometheus export is on.
type meters struct {
	provider metric.MeterProvider // nil: metrics off
	handler  http.Handler         // nil: no /metrics
	shutdown func(context.Context) error
}

// setupMetrics builds the meter provider from the standard OTEL_*
// variables. OTEL_METRICS_EXPORTER is a comma-separated list of prometheus
// (GET /metrics on the admin listener, from a registry of its own), otlp
// (pushed every OTEL_METRIC_EXPORT_INTERVAL ms to
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, over
// OTEL_EXPORTER_OTLP_METRICS_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL) or
// none. Unset, it is prometheus, plus otlp when an OTLP endpoint is set.
func setupMetrics(ctx context.Context, env func(string) string, res *resource.Resource) (*meters, error) {
	want, err := metricExporters(env)
	if err != nil {
		return nil, err
	}
	m := &meters{shutdown: func(context.Context) error { return nil }}
	if len(want) == 0 {
		return m, nil
	}
	// Baton records outside any span (docs/metrics.md), so the trace-based
	// exemplar filter would never sample: off, it costs nothing.
	opts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter)}
	var otlpExp sdkmetric.Exporter
	if want["otlp"] {
		if otlpExp, err = otlpMetricExporter(ctx, env); err != nil {
			return nil, err
		}
	}
	// The request path's histograms are Baton's own, far cheaper to record
	// than the SDK's, and reach every reader as its producer. They are what
	// the SDK would export only for cumulative explicit-bucket histograms:
	// an OTLP exporter asking for anything else gets the SDK's instead.
	var hist *middleware.Histograms
	if otlpExp == nil || ownHistograms(otlpExp) {
		hist = middleware.NewHistograms()
	}
	if want["prometheus"] {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		popts := []otelprom.Option{otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo()}
		if hist != nil {
			popts = append(popts, otelprom.WithProducer(hist))
		}
		exp, err := otelprom.New(popts...)
		if err != nil {
			if otlpExp != nil {
				_ = otlpExp.Shutdown(ctx)
			}
			return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(exp))
		m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if otlpExp != nil {
		var ropts []sdkmetric.PeriodicReaderOption
		if hist != nil {
			ropts = append(ropts, sdkmetric.WithProducer(hist))
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(otlpExp, ropts...)))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	m.provider, m.shutdown = middleware.WithHistograms(mp, hist), mp.Shutdown
	return m, nil
}

// ownHistograms tells whether exp takes histograms as Baton's own are
// produced: cumulative, in explicit buckets with min and max (the SDK's
// default aggregation, whose boundaries the instruments' advice replaces).
func ownHistograms(exp sdkmetric.Exporter) bool {
	const k = sdkmetric.InstrumentKindHistogram
	if exp.Temporality(k) != metricdata.CumulativeTemporality {
		return false
	}
	switch a := exp.Aggregation(k).(type) {
	case nil, sdkmetric.AggregationDefault:
		return true
	case sdkmetric.AggregationExplicitBucketHistogram:
		return !a.NoMinMax
	}
	return false
}

// metricExporters reads OTEL_METRICS_EXPORTER into the set of exporters on.
func metricExporters(env func(string) string) (map[string]bool, error) {
	v := strings.TrimSpace(env("OTEL_METRICS_EXPORTER"))
	if v == "" {
		want := map[string]bool{"prometheus": true}
		if env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "" {
			want["otlp"] = true
		}
		return want, nil
	}
	want := map[string]bool{}
	for _, e := range strings.Split(v, ",") {
		switch e = strings.TrimSpace(e); e {
		case "none":
		case "otlp", "prometheus":
			want[e] = true
		default:
			return nil, fmt.Errorf("metrics: OTEL_METRICS_EXPORTER=%q: want a list of otlp, prometheus or none", v)
		}
	}
	return want, nil
}

// otlpMetricExporter returns the OTLP metric exporter for the protocol the
// environment names; the exporter reads its endpoint, headers and TLS
// settings from the OTEL_EXPORTER_OTLP_* variables itself.
func otlpMetricExporter(ctx context.Context, env func(string) string) (sdkmetric.Exporter, error) {
	proto := env("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")
	if proto == "" {
		proto = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdkmetric.Exporter
	var err error
	switch proto {
	case "", "http/protobuf":
		exp, err = otlpmetrichttp.New(ctx)
	case "grpc":
		exp, err = otlpmetricgrpc.New(ctx)
	default:
		return nil, fmt.Errorf("metrics: OTLP protocol %q: want grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: OTLP exporter: %w", err)
	}
	return exp, nil
}
