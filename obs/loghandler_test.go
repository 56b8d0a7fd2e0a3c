package obs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/das-ask/ask/obs"
)

func TestLogHandlerAddsRequestAndTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(obs.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	h := obs.New(obs.Options{}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "inside")
		log.Info("no context")
	}))
	req := httptest.NewRequest(http.MethodGet, "/ask/v1/openapi.yaml", nil)
	req.Header.Set("X-Request-Id", "req-42")
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.ServeHTTP(httptest.NewRecorder(), req)

	dec := json.NewDecoder(&buf)
	var inside, plain map[string]any
	if err := dec.Decode(&inside); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&plain); err != nil {
		t.Fatal(err)
	}
	if inside["request_id"] != "req-42" || inside["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || inside["component"] != "x" {
		t.Errorf("with a context: %v", inside)
	}
	if _, ok := plain["request_id"]; ok {
		t.Errorf("without a context: %v", plain)
	}

	// A context with neither adds nothing.
	buf.Reset()
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}), "bare")
	var bare map[string]any
	json.Unmarshal(buf.Bytes(), &bare)
	if _, ok := bare["trace_id"]; ok {
		t.Errorf("an invalid span context gave a trace id: %v", bare)
	}
}
