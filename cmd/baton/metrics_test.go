package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/resource"
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
