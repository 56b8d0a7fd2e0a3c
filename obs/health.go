package obs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/das-ask/ask/store"
)

// Pinger is a store (or anything else readiness depends on) that can say cheaply whether it is
// reachable.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Refuser is a store that can answer and still refuse work for a reason of its own: Refusing
// names it (a readiness reason: the Redis store's "store_persists_unsealed" while its Redis
// persists and it does not seal), "" when there is none. It may ask the store, within ctx.
type Refuser interface {
	Refusing(ctx context.Context) string
}

// HealthOptions configure NewHealth. Zero values mean: nothing to wait for.
type HealthOptions struct {
	// JWKSReady reports whether the bearer validator has ever loaded the JWKS
	// ((*auth.Validator).Ready); nil means always.
	JWKSReady func() bool
	// Store is the run registry. Readiness pings it when it is a Pinger, and otherwise looks up
	// a ticket that cannot exist: ErrNotFound means reachable, any other error unreachable.
	Store store.Store
	// Timeout bounds the store check; zero means 2 s.
	Timeout time.Duration
}

// Health answers the liveness and readiness probes. It is safe for concurrent use.
type Health struct {
	opts     HealthOptions
	draining atomic.Bool
}

// NewHealth returns the probes.
func NewHealth(opts HealthOptions) *Health {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	return &Health{opts: opts}
}

// Drain marks the service as shutting down: from now on it is not ready, so a load balancer
// stops sending it new asks while running ones finish. It cannot be undone.
func (h *Health) Drain() { h.draining.Store(true) }

// probeTicket is a ticket id no ticket has (they are "t_" and base32).
const probeTicket = "readiness-probe"

// Check returns why the service is not ready, or nil when it is: "shutting_down",
// "jwks_not_loaded", "store_unreachable", and what a reachable store that is a Refuser says
// (the Redis store's "store_persists_unsealed").
func (h *Health) Check(ctx context.Context) []string {
	var why []string
	if h.draining.Load() {
		why = append(why, "shutting_down")
	}
	if h.opts.JWKSReady != nil && !h.opts.JWKSReady() {
		why = append(why, "jwks_not_loaded")
	}
	if st := h.opts.Store; st != nil {
		ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
		defer cancel()
		var err error
		if p, ok := st.(Pinger); ok {
			err = p.Ping(ctx)
		} else if _, err = st.Ticket(ctx, probeTicket); errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		if err != nil {
			why = append(why, "store_unreachable")
		} else if r, ok := st.(Refuser); ok {
			if reason := r.Refusing(ctx); reason != "" {
				why = append(why, reason)
			}
		}
	}
	return why
}

// Live answers the liveness probe: 200 while the process serves HTTP at all.
func (h *Health) Live(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// Ready answers the readiness probe: 200 {"status":"ready"}, or 503 {"status":"not_ready",
// "reasons":[...]} with the reasons Check gives.
func (h *Health) Ready(w http.ResponseWriter, r *http.Request) {
	why := h.Check(r.Context())
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	body := struct {
		Status  string   `json:"status"`
		Reasons []string `json:"reasons,omitempty"`
	}{Status: "ready", Reasons: why}
	if len(why) > 0 {
		body.Status = "not_ready"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// AdminHandler serves GET /metrics (m), /healthz and /readyz (h), for a listener the gateway
// does not expose: the metrics describe the whole service's traffic.
func AdminHandler(m *Metrics, h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", h.Live)
	mux.HandleFunc("GET /readyz", h.Ready)
	return mux
}
