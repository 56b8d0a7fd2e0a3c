package client_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask/client"
)

// Reconnect.Attempts counts reconnects: the first connection and Attempts more. The error said
// "no progress after N attempts" when N+1 connections had failed (the Python client says
// reconnects); Retry.Attempts, beside it, counts every try, the first included.
func TestReconnectBudgetCountsReconnects(t *testing.T) {
	var hits atomic.Int32
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"type":"about:blank","title":"Service Unavailable","status":503}`)
	}), client.Options{Reconnect: client.Reconnect{Attempts: 2, Initial: time.Millisecond, Max: time.Millisecond}})
	var last error
	for _, err := range c.Events(t.Context(), "tk", client.EventsOptions{}) {
		last = err
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("%d connections, want 3: the first and 2 reconnects", n)
	}
	if last == nil || !strings.Contains(last.Error(), "no progress after 2 reconnects") {
		t.Errorf("error %v: want it to say how many connections failed", last)
	}
}
