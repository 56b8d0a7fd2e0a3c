package main

import (
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// TestServerClosesIdleConnections: the source's server has askd's timeouts. It set only
// ReadHeaderTimeout, so a kept-alive connection that sent nothing more was held for good (net/http
// falls back from IdleTimeout to ReadTimeout, zero here): a client could hold any number open.
func TestServerClosesIdleConnections(t *testing.T) {
	srv := httpServer(t.Context(), http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	if got, want := srv.IdleTimeout, 120*time.Second; got != want {
		t.Errorf("IdleTimeout = %v, want %v (askd's)", got, want)
	}
	if got, want := srv.ReadHeaderTimeout, 10*time.Second; got != want {
		t.Errorf("ReadHeaderTimeout = %v, want %v", got, want)
	}
	if srv.ReadTimeout != 0 || srv.WriteTimeout != 0 {
		t.Errorf("ReadTimeout %v, WriteTimeout %v: either ends the MCP session's event streams", srv.ReadTimeout, srv.WriteTimeout)
	}
}
