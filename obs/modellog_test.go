package obs_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/agent/model/openai"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
)

// TestModelFailureLineNamesTheAsk: the adapter's `model call failed` warning, logged through
// askd's logger (obs.LogHandler), names the ask it was for (ticket, and trace_id when traced),
// as a tool call's lines do. It named only the provider and the model, so with asks running side
// by side an operator could not tell which ask a provider's refusal or a retried 5xx was part of.
func TestModelFailureLineNamesTheAsk(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest) // rejected: one attempt, no retry
		_, _ = w.Write([]byte(`{"error":{"message":"bad request","type":"invalid_request_error"}}`))
	}))
	defer provider.Close()
	var logs bytes.Buffer
	log := slog.New(obs.LogHandler(slog.NewJSONHandler(&logs, nil)))
	o := obs.New(obs.Options{Logger: log})
	h := o.Hooks()
	h.Admitted(context.Background(), server.Admission{Ticket: "t_MODELLINE", Conversation: "c1", OID: "alice", CreatedAt: time.Now()})
	m, err := openai.New(openai.Options{BaseURL: provider.URL + "/v1", Model: "m", APIKey: "k", Provider: "stub", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx := h.Running(t.Context(), "t_MODELLINE")
	if _, err := o.Model(m, "stub").Complete(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}}); err == nil {
		t.Fatal("the provider's 400 was not an error")
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"model call failed"`) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no model call failed line:\n%s", logs.String())
	}
	if !strings.Contains(line, `"ticket":"t_MODELLINE"`) {
		t.Errorf("the model's line does not name the ask's ticket: %s", line)
	}
}

// TestLogHandlerAddsNoSecondTicket: a line that names its ticket itself, in the record or in
// the logger (the agent's `source unreachable`, logged through log.With("ticket", …) with the
// run's context), keeps that one, not a second ticket key.
func TestLogHandlerAddsNoSecondTicket(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(obs.LogHandler(slog.NewJSONHandler(&logs, nil)))
	o := obs.New(obs.Options{Logger: log})
	h := o.Hooks()
	h.Admitted(context.Background(), server.Admission{Ticket: "t_ONE", Conversation: "c1", OID: "alice", CreatedAt: time.Now()})
	ctx := h.Running(t.Context(), "t_ONE")
	log.With("ticket", "t_ONE").WarnContext(ctx, "source unreachable")
	log.WarnContext(ctx, "tool call", "ticket", "t_ONE")
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if n := strings.Count(l, `"ticket"`); n != 1 {
			t.Errorf("%d ticket keys in %s", n, l)
		}
	}
}
