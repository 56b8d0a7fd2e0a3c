package obs_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// Example wires an Observer the way package app does: around the API handler, on the service's
// hooks (and, not shown, around the model), with the admin handler on a listener of its own.
func Example() {
	tracing, _ := obs.NewTracing(context.Background(), obs.TracingOptions{}) // off unless OTEL_EXPORTER_OTLP_ENDPOINT is set
	o := obs.New(obs.Options{TracerProvider: tracing.Provider})
	mem := store.NewMemory(store.MemoryOptions{})
	_ = server.Options{Hooks: o.Hooks(), Store: mem} // with the Runner and Authenticator; o.Model wraps the agent's model

	api := o.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized) // as the service answers a request without a bearer
	}))
	admin := obs.AdminHandler(o.Metrics(), obs.NewHealth(obs.HealthOptions{Store: mem}))

	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/ask/v1/conversations", nil))
	fmt.Println("request id set:", rec.Header().Get("X-Request-Id") != "")

	for _, path := range []string{"/readyz", "/metrics"} {
		rec = httptest.NewRecorder()
		admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code)
	}
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, "ask_admission_refusals_total{") && !strings.HasSuffix(line, " 0\n") { // every reason is there, at zero until counted
			fmt.Print(line)
		}
	}
	// Output:
	// request id set: true
	// /readyz 200
	// /metrics 200
	// ask_admission_refusals_total{reason="unauthorized",route="create_conversation"} 1
}
