package obs_test

import (
	"context"
	"testing"
	"time"

	"github.com/das-ask/ask/obs"
)

func TestTracingOffByDefault(t *testing.T) {
	tr, err := obs.NewTracing(t.Context(), obs.TracingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled {
		t.Error("tracing enabled with no exporter configured")
	}
	_, span := tr.Provider.Tracer("t").Start(t.Context(), "x")
	if span.SpanContext().IsValid() || span.IsRecording() {
		t.Error("the default provider records spans")
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Error(err)
	}
}

func TestTracingOTLPWhenConfigured(t *testing.T) {
	// An endpoint nothing listens on: spans are batched, and Shutdown gives up at its deadline.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tr, err := obs.NewTracing(t.Context(), obs.TracingOptions{OTLP: true})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled {
		t.Fatal("OTLP set, tracing off")
	}
	// The span is not ended, so nothing is queued for an endpoint nothing listens on.
	_, span := tr.Provider.Tracer("t").Start(t.Context(), "x")
	if !span.SpanContext().IsValid() || !span.IsRecording() {
		t.Error("the OTLP provider does not record spans")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}
