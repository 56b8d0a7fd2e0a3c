package obs

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracingOptions configure NewTracing. Zero values mean: export nothing unless the standard
// OTLP variables say where to.
type TracingOptions struct {
	// Exporter, when set, receives every span synchronously (tests use
	// tracetest.NewInMemoryExporter); the OTLP variables are then ignored.
	Exporter sdktrace.SpanExporter
	// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME sets it; "" means askd.
	ServiceName string
	// OTLP exports spans over OTLP/HTTP in batches (config.OpsConfig.OTLP: the standard
	// OTEL_EXPORTER_OTLP_ENDPOINT is set); the exporter reads its other OTEL_* variables itself.
	OTLP bool
}

// Tracing is the service's tracer provider and how to stop it.
type Tracing struct {
	// Provider creates the tracers; a no-op provider when tracing is off.
	Provider trace.TracerProvider
	// Enabled reports whether spans are exported anywhere.
	Enabled bool
	sdk     *sdktrace.TracerProvider
}

// NewTracing returns the tracer provider the configuration asks for. Tracing is off (a no-op
// provider, nothing recorded) unless Exporter or OTLP is set: with OTLP spans go over OTLP/HTTP in batches, configured by
// the standard OTEL_EXPORTER_OTLP_* variables (headers, timeout, TLS) and sampled as
// OTEL_TRACES_SAMPLER says (default: always, or as the caller's traceparent says). ctx bounds
// the setup only.
func NewTracing(ctx context.Context, opts TracingOptions) (*Tracing, error) {
	name := opts.ServiceName
	if name == "" {
		name = "askd"
	}
	var sp sdktrace.TracerProviderOption
	switch {
	case opts.Exporter != nil:
		sp = sdktrace.WithSyncer(opts.Exporter)
	case opts.OTLP:
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, err
		}
		sp = sdktrace.WithBatcher(exp)
	default:
		return &Tracing{Provider: noop.NewTracerProvider()}, nil
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", name)), resource.WithFromEnv())
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sp, sdktrace.WithResource(res))
	return &Tracing{Provider: tp, Enabled: true, sdk: tp}, nil
}

// Shutdown flushes the spans not yet exported and stops the exporter, waiting until ctx is
// done at most. It is a no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}
