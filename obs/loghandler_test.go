package obs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
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

// panickyStore is a store whose ticket lookups panic: a bug of the service's own.
type panickyStore struct{ *store.Memory }

func (panickyStore) Ticket(context.Context, string) (store.Ticket, error) { panic("a bug") }

type anyone struct{}

func (anyone) Authenticate(_ context.Context, token string) (ask.Identity, error) {
	return ask.Identity{OID: "alice", Tenant: "t", Token: token}, nil
}

// A request the service answers 500 after a handler panicked is found in the logs by the
// X-Request-Id its client got: the line with the stack names it, as the request line does.
func TestPanicLineNamesTheRequest(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(obs.LogHandler(slog.NewJSONHandler(&buf, nil)))
	svc, err := server.New(server.Options{
		Authenticator: anyone{}, Store: panickyStore{store.NewMemory(store.MemoryOptions{})}, Logger: log.With("component", "ask"),
		Runner: ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return ask.Outcome{} }),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(t.Context())
	h := obs.New(obs.Options{Logger: log.With("component", "obs")}).Handler(svc.Handler())
	req := httptest.NewRequest(http.MethodGet, "/ask/v1/asks/t_NOSUCHTICKETNOSUCHTICKET00", nil)
	req.Header.Set("Authorization", "Bearer x")
	req.Header.Set("X-Request-Id", "req-panic")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusInternalServerError || w.Header().Get("X-Request-Id") != "req-panic" {
		t.Fatalf("got %d with X-Request-Id %q, want 500 with req-panic", w.Code, w.Header().Get("X-Request-Id"))
	}
	found := false
	for line := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["msg"] == "handler panicked" {
			found = true
			if rec["request_id"] != "req-panic" {
				t.Errorf("the panic's line does not name the request: %s", line)
			}
		}
	}
	if !found {
		t.Fatalf("no panic line in:\n%s", buf.String())
	}
}
