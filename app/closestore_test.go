package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/store"
)

// TestCloseClosesTheMemoryStore: Close closes the in-memory store too, as its doc says ("the
// store is closed"): its expiry timer stopped and what it held dropped. Left open, a Main
// closed in a process that goes on (the dev stack's restarts, the bench, tests) kept every
// conversation and ticket, questions included, and an armed timer, until their TTL.
func TestCloseClosesTheMemoryStore(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Addr, cfg.Ops.AdminAddr = "127.0.0.1:0", ""
	m := app.NewMain(cfg)
	m.Authenticator = aliceAuth{}
	m.Runner = ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return ask.Outcome{} })
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, m.URL()+"/v1/conversations", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var conv struct {
		ID string `json:"id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&conv)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create conversation: %s %v", resp.Status, err)
	}
	http.DefaultClient.CloseIdleConnections()
	st := app.StoreOf(m)
	if _, _, err := st.Conversation(t.Context(), conv.ID); err != nil {
		t.Fatalf("conversation before Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Conversation(t.Context(), conv.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("conversation after Close: %v, want store.ErrNotFound (the store closed, its contents dropped)", err)
	}
}
