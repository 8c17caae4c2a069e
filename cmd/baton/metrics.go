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
	"go.opentelemetry.io/otel/sdk/resource"
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
	if want["prometheus"] {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
		if err != nil {
			return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(exp))
		m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if want["otlp"] {
		exp, err := otlpMetricExporter(ctx, env)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	m.provider, m.shutdown = mp, mp.Shutdown
	return m, nil
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
