package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/batonproxy/baton/middleware"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// telemetry is the process's tracing and metrics setup.
type telemetry struct {
	provider   trace.TracerProvider
	propagator propagation.TextMapPropagator
	meters     *meters // metrics.go
	shutdown   func(context.Context) error
}

// setupTelemetry builds the tracer provider from the standard OTEL_*
// variables, and the meter provider (setupMetrics). A tracer provider exists
// even with no exporter: Baton needs real span and trace ids to propagate,
// whether or not anything is exported. With no exporter it is middleware.IDTracerProvider,
// which propagates what the SDK would and records nothing.
func setupTelemetry(ctx context.Context, env func(string) string, agent string) (*telemetry, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "baton"), attribute.String("baton.agent", agent)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	exp, err := exporter(ctx, env)
	if err != nil {
		return nil, err
	}
	m, err := setupMetrics(ctx, env, res)
	if err != nil {
		return nil, err
	}
	t := &telemetry{
		provider:   &middleware.IDTracerProvider{},
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		meters:     m,
		shutdown:   m.shutdown,
	}
	if exp != nil {
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp))
		t.provider = tp
		t.shutdown = func(ctx context.Context) error { return errors.Join(tp.Shutdown(ctx), m.shutdown(ctx)) }
	}
	return t, nil
}

// exporter returns the OTLP span exporter the environment asks for, or nil.
func exporter(ctx context.Context, env func(string) string) (sdktrace.SpanExporter, error) {
	switch strings.TrimSpace(env("OTEL_TRACES_EXPORTER")) {
	case "none":
		return nil, nil
	case "otlp":
	case "":
		if env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	default:
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: only otlp and none are supported", env("OTEL_TRACES_EXPORTER"))
	}
	proto := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: OTLP protocol %q: want grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	return exp, nil
}
