package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAskServeExportsTracesAsAskdDoes: with OTEL_EXPORTER_OTLP_ENDPOINT set, ask-serve's
// service exports its spans as askd's does, and docs/operations.md says so. The page said
// "make ask-serve exports no traces" and sent a reader to run bin/askd beside it for them.
func TestAskServeExportsTracesAsAskdDoes(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), "exports no traces") || !strings.Contains(string(doc), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 make ask-serve") {
		t.Error("docs/operations.md does not say that make ask-serve exports traces with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}

	var exported atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			exported.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collector.Close) // after ask-serve stops, as its cleanup was registered later
	// The exporter reads its endpoint from the process's environment; config, from the environment run is given.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)

	s := startServe(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}, nil)
	a := s.ask("How many sev1 incidents did we have in 2026-Q2?")
	stream := s.events(a.eventsURL, a.token)
	events, _ := io.ReadAll(stream.Body) // to done, which closes the stream
	stream.Body.Close()
	if !strings.Contains(string(events), "event: done") {
		t.Fatalf("the stream ended without done:\n%s", events)
	}
	s.stop() // the last spans are exported by then
	if exported.Load() == 0 {
		t.Error("ask-serve exported no spans to OTEL_EXPORTER_OTLP_ENDPOINT")
	}
}
