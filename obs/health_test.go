package obs_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/store"
)

// brokenStore is a store whose engine cannot be reached.
type brokenStore struct{ store.Store }

func (brokenStore) Ticket(context.Context, string) (store.Ticket, error) {
	return store.Ticket{}, errors.New("dial tcp: connection refused")
}

// pingStore answers readiness through Ping.
type pingStore struct {
	store.Store
	err   error
	pings atomic.Int32
}

func (p *pingStore) Ping(context.Context) error { p.pings.Add(1); return p.err }

// refusingStore answers and still refuses work for a reason of its own (obs.Refuser).
type refusingStore struct {
	store.Store
	reason string
}

func (refusingStore) Ping(context.Context) error        { return nil }
func (r refusingStore) Refusing(context.Context) string { return r.reason }

func TestReadiness(t *testing.T) {
	var jwks atomic.Bool
	mem := store.NewMemory(store.MemoryOptions{})
	pinger := &pingStore{Store: mem, err: errors.New("down")}
	for _, tc := range []struct {
		name   string
		health func() *obs.Health
		want   []string
	}{
		{"jwks never loaded", func() *obs.Health {
			return obs.NewHealth(obs.HealthOptions{JWKSReady: jwks.Load, Store: mem})
		}, []string{"jwks_not_loaded"}},
		{"ready", func() *obs.Health {
			jwks.Store(true)
			return obs.NewHealth(obs.HealthOptions{JWKSReady: jwks.Load, Store: mem})
		}, nil},
		{"shutting down", func() *obs.Health {
			h := obs.NewHealth(obs.HealthOptions{JWKSReady: jwks.Load, Store: mem})
			h.Drain()
			return h
		}, []string{"shutting_down"}},
		{"store unreachable", func() *obs.Health {
			return obs.NewHealth(obs.HealthOptions{JWKSReady: jwks.Load, Store: brokenStore{mem}})
		}, []string{"store_unreachable"}},
		{"store ping fails", func() *obs.Health {
			return obs.NewHealth(obs.HealthOptions{Store: pinger})
		}, []string{"store_unreachable"}},
		{"store refuses", func() *obs.Health {
			return obs.NewHealth(obs.HealthOptions{Store: refusingStore{mem, "store_persists_unsealed"}})
		}, []string{"store_persists_unsealed"}},
		{"store refuses nothing", func() *obs.Health {
			return obs.NewHealth(obs.HealthOptions{Store: refusingStore{Store: mem}})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := obs.AdminHandler(obs.NewMetrics(), tc.health())
			rec := httptest.NewRecorder()
			admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			var body struct {
				Status  string
				Reasons []string
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("readyz body %q: %v", rec.Body, err)
			}
			wantStatus := http.StatusOK
			if tc.want != nil {
				wantStatus = http.StatusServiceUnavailable
			}
			if rec.Code != wantStatus || !slices.Equal(body.Reasons, tc.want) {
				t.Errorf("readyz: %d %v, want %d %v", rec.Code, body.Reasons, wantStatus, tc.want)
			}
			live := httptest.NewRecorder()
			admin.ServeHTTP(live, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if live.Code != http.StatusOK {
				t.Errorf("healthz: %d, want 200 whatever readiness says", live.Code)
			}
		})
	}
	if pinger.pings.Load() != 1 {
		t.Errorf("the store's Ping was called %d times, want 1", pinger.pings.Load())
	}
}
