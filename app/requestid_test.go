package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
)

// TestRejectedBearerLinesNameTheRequest: at debug level, every line askd writes about a request
// whose bearer it rejects names that request's X-Request-Id, so the gateway's line for the 401
// finds them. Found by an operator's audit: the service's own `bearer rejected` line had no
// request_id (it was logged without the request's context), the validator's beside it had one.
func TestRejectedBearerLinesNameTheRequest(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Ops.AdminAddr = ""
	cfg.Ops.LogLevel = slog.LevelDebug
	var logs bytes.Buffer
	m := app.NewMain(cfg)
	m.Logger = app.NewLogger(cfg.Ops, &logs)
	m.Authenticator = noAuth{} // an identity without an oid: rejected
	m.Runner = ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return ask.Outcome{} })
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, m.URL()+"/v1/conversations", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer not-a-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "rid-bearer-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", resp.StatusCode)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	var seen bool
	for line := range strings.Lines(logs.String()) {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != "bearer rejected" {
			continue
		}
		seen = true
		if l["request_id"] != "rid-bearer-1" {
			t.Errorf("a line about the rejected request without its id: %s", line)
		}
	}
	if !seen {
		t.Fatalf("no bearer rejected line; logs:\n%s", logs.String())
	}
}
