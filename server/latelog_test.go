//go:build !fuzzsmoke

package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/internal/memnet"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestLateCreatedAskLineNamesItsRequest: the warn line of an ask the store created after its
// request was answered 503 (ended unrun) carries that request's id and the ask's
// conversation, as askd logs it (obs in front, its LogHandler): before, it named the ticket
// alone, a ticket the client never heard of, so nothing tied it to the 503 the client got.
func TestLateCreatedAskLineNamesItsRequest(t *testing.T) {
	srv := redistest.Start(t)
	st := &pendingStore{Store: replicaStore(t, srv, "latelog:"+rand.Text()+":", time.Minute)}
	logs := &logtest.Buffer{}
	log := slog.New(obs.LogHandler(slog.NewJSONHandler(logs, nil)))
	s, err := server.New(server.Options{Store: st, Logger: log, Authenticator: fakeAuth{}, Runner: answerRunner(1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	hc := &http.Client{Transport: memnet.Transport{Handler: obs.New(obs.Options{Logger: log}).Handler(s.Handler())}}
	post := func(path, rid, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://ask.test/ask"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+alice)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", rid)
		r, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Body.Close() })
		return r
	}
	r := post("/v1/conversations", "rq-conv", "{}")
	var conv struct{ ID string }
	if err := json.NewDecoder(r.Body).Decode(&conv); err != nil || r.StatusCode != http.StatusCreated {
		t.Fatalf("conversation: %d %v", r.StatusCode, err)
	}
	if r := post("/v1/conversations/"+conv.ID+"/asks", "rq-late-ask", `{"question":"How many sev1 incidents did we have in 2026-Q2?"}`); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("create answered pending: %d, want 503", r.StatusCode)
	}
	const msg = "ask created after its request gave up on the store: ended unrun"
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a bound for the failure only
	defer cancel()
	if err := logs.WaitFor(ctx, msg); err != nil {
		t.Fatalf("no %q line: %v\n%s", msg, err, logs.String())
	}
	for line := range strings.Lines(logs.String()) {
		if !strings.Contains(line, msg) {
			continue
		}
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		if l["request_id"] != "rq-late-ask" || l["conversation"] != conv.ID || !strings.HasPrefix(l["ticket"].(string), "t_") {
			t.Errorf("the late ask's line %s, want its request_id rq-late-ask, conversation %s and ticket", bytes.TrimSpace([]byte(line)), conv.ID)
		}
	}
}
