package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/batonproxy/baton/middleware"
)

func TestMetricExporters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    string // sorted, comma-separated
		wantErr bool
	}{
		{name: "default: prometheus only", want: "prometheus"},
		{name: "an OTLP endpoint adds otlp", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: "otlp,prometheus"},
		{name: "a metrics endpoint adds otlp", env: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, want: "otlp,prometheus"},
		{name: "otlp only", env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp"}, want: "otlp"},
		{name: "both, spaced", env: map[string]string{"OTEL_METRICS_EXPORTER": " prometheus , otlp "}, want: "otlp,prometheus"},
		{name: "none", env: map[string]string{"OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: ""},
		{name: "unsupported", env: map[string]string{"OTEL_METRICS_EXPORTER": "console"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := metricExporters(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			var names []string
			for _, n := range []string{"otlp", "prometheus"} {
				if got[n] {
					names = append(names, n)
				}
			}
			if s := strings.Join(names, ","); !tc.wantErr && s != tc.want {
				t.Errorf("exporters %q, want %q", s, tc.want)
			}
		})
	}
}

func TestSetupMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	off, err := setupMetrics(ctx, func(k string) string { return map[string]string{"OTEL_METRICS_EXPORTER": "none"}[k] }, resource.Empty())
	if err != nil || off.provider != nil || off.handler != nil {
		t.Errorf("none: provider %v, handler %v, %v; want neither", off.provider, off.handler, err)
	}
	if _, err := setupMetrics(ctx, func(k string) string {
		return map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}[k]
	}, resource.Empty()); err == nil || !strings.Contains(err.Error(), "carrier-pigeon") {
		t.Errorf("an unknown protocol: %v", err)
	}
}

// TestServeMetrics runs baton serve and scrapes its admin listener.
func TestServeMetrics(t *testing.T) {
	t.Parallel()
	cfg := writeFile(t, "agent: analyst\nupstream: http://127.0.0.1:9\npeers: {summarizer: {url: http://127.0.0.1:9}}\n"+
		"listen: {egress: 127.0.0.1:0, ingress: 127.0.0.1:0, admin: 127.0.0.1:0}\n")
	ctx, cancel := context.WithCancel(context.Background())
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, io.Discard, logs, noEnv) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	addrs := listening(t, logs)
	resp, err := http.Get("http://" + addrs["admin"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`baton_breaker_state{from="analyst",side="egress",to="summarizer"} 0`,
		`baton_handoff_retries_total{from="analyst",side="egress",to="summarizer"} 0`,
		`target_info{baton_agent="analyst"`,
		"go_goroutines ",
		"process_start_time_seconds ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// scrapeHistograms records a store operation and a client request into
// Metrics on the provider, and returns what its /metrics serves.
func scrapeHistograms(t *testing.T, m *meters) string {
	t.Helper()
	mt, err := middleware.NewMetrics(m.provider)
	if err != nil {
		t.Fatal(err)
	}
	mt.Store("get").Done(time.Now(), nil)
	mt.Client("summarizer").Record(http.MethodPost, 200, 5*time.Millisecond)
	w := httptest.NewRecorder()
	m.handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := w.Body.String()
	for _, want := range []string{
		`baton_store_duration_seconds_count{op="get"} 1`,
		`http_client_request_duration_seconds_bucket{http_request_method="POST",http_response_status_code="200",server_address="summarizer",le="0.0025"} 0`,
		`http_client_request_duration_seconds_bucket{http_request_method="POST",http_response_status_code="200",server_address="summarizer",le="0.005"} 1`,
		`http_client_request_duration_seconds_sum{http_request_method="POST",http_response_status_code="200",server_address="summarizer"} 0.005`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	return body
}

// TestSetupMetricsHistograms checks that baton serve's provider records
// the request path's histograms into Baton's own, served on /metrics.
func TestSetupMetricsHistograms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, err := setupMetrics(ctx, func(string) string { return "" }, resource.Empty())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.shutdown(ctx) })
	if _, sdk := m.provider.(*sdkmetric.MeterProvider); sdk {
		t.Error("the provider records histograms into the SDK's instruments")
	}
	scrapeHistograms(t, m)
}

// TestSetupMetricsDeltaOTLP checks that an OTLP exporter asking for delta
// histograms gets the SDK's, and /metrics still serves them.
func TestSetupMetricsDeltaOTLP(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
	env := map[string]string{"OTEL_METRICS_EXPORTER": "prometheus,otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
	m, err := setupMetrics(context.Background(), func(k string) string { return env[k] }, resource.Empty())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = m.shutdown(ctx)
	})
	if _, sdk := m.provider.(*sdkmetric.MeterProvider); !sdk {
		t.Errorf("provider %T, want the SDK's own", m.provider)
	}
	scrapeHistograms(t, m)
}

func TestOwnHistograms(t *testing.T) {
	t.Parallel()
	delta := func(sdkmetric.InstrumentKind) metricdata.Temporality { return metricdata.DeltaTemporality }
	agg := func(a sdkmetric.Aggregation) sdkmetric.AggregationSelector {
		return func(sdkmetric.InstrumentKind) sdkmetric.Aggregation { return a }
	}
	for _, tc := range []struct {
		name string
		opts []otlpmetrichttp.Option
		want bool
	}{
		{"defaults", nil, true},
		{"explicit buckets", []otlpmetrichttp.Option{otlpmetrichttp.WithAggregationSelector(agg(sdkmetric.AggregationExplicitBucketHistogram{Boundaries: []float64{1}}))}, true},
		{"delta", []otlpmetrichttp.Option{otlpmetrichttp.WithTemporalitySelector(delta)}, false},
		{"exponential", []otlpmetrichttp.Option{otlpmetrichttp.WithAggregationSelector(agg(sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}))}, false},
		{"no min and max", []otlpmetrichttp.Option{otlpmetrichttp.WithAggregationSelector(agg(sdkmetric.AggregationExplicitBucketHistogram{NoMinMax: true}))}, false},
		{"dropped", []otlpmetrichttp.Option{otlpmetrichttp.WithAggregationSelector(agg(sdkmetric.AggregationDrop{}))}, false},
	} {
		exp, err := otlpmetrichttp.New(context.Background(), tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := ownHistograms(exp); got != tc.want {
			t.Errorf("%s: ownHistograms %v, want %v", tc.name, got, tc.want)
		}
		_ = exp.Shutdown(context.Background())
	}
}
