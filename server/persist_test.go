package server_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestRedisRestartedToPersist is the audit's repro: the service runs on a memory-only Redis
// (no seal keys), and Redis is killed and started again on the same port with appendonly yes.
// The store judges the new server on its first connections: an ask answers 503 problem+json
// with Retry-After and a detail saying why, nothing is created, /readyz says
// store_persists_unsealed, an error line says why, and no file Redis writes holds the
// question. Once Redis no longer persists (CONFIG SET appendonly no), asks are taken again,
// with no restart of the service. Before the fix the question went to the AOF readable.
func TestRedisRestartedToPersist(t *testing.T) {
	srv := redistest.Start(t)
	storeLogs := &logtest.Buffer{}
	st := replicaStoreWith(t, srv, redisstore.Options{Prefix: "persist:" + rand.Text() + ":", Logger: slog.New(slog.NewJSONHandler(storeLogs, nil))})
	h := newHarness(t, server.Options{Store: st})
	health := obs.NewHealth(obs.HealthOptions{Store: st})
	ctx := t.Context()
	checkLifecycle(t, h.events(alice, h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q1?")), gen.EventTypeAnswer)

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.RestartDurable(ctx); err != nil {
		t.Fatal(err)
	}
	cid := h.conv(alice) // the old conversation went with the restart; a conversation holds no question
	const secret = "Which secret acquisition is the board weighing in 2026-Q4?"
	ra := h.askRaw(alice, cid, secret)
	pr := problemOf(t, ra.StatusCode(), ra.HTTPResponse.Header.Get("Content-Type"), ra.Body, http.StatusServiceUnavailable)
	if ra.HTTPResponse.Header.Get("Retry-After") == "" || pr.Detail == nil || !strings.Contains(*pr.Detail, "disk") {
		t.Errorf("createAsk on a Redis that persists: Retry-After %q, detail %v", ra.HTTPResponse.Header.Get("Retry-After"), pr.Detail)
	}
	if why := health.Check(ctx); !slices.Contains(why, redisstore.ReasonPersistsUnsealed) {
		t.Errorf("readiness reasons %v, want %s", why, redisstore.ReasonPersistsUnsealed)
	}
	rec := httptest.NewRecorder()
	health.Ready(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/readyz", nil))
	var ready struct{ Reasons []string }
	if err := json.Unmarshal(rec.Body.Bytes(), &ready); rec.Code != http.StatusServiceUnavailable || err != nil || !slices.Contains(ready.Reasons, redisstore.ReasonPersistsUnsealed) {
		t.Errorf("/readyz: %d %s", rec.Code, rec.Body)
	}
	if logs := storeLogs.String(); !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "persists to disk") {
		t.Errorf("no error line says why: %s", logs)
	}
	// Redis writes its AOF from the restart on (the conversation is in it); the question never.
	redistest.Poll(t, "the new conversation in the AOF", func() bool { return bytes.Contains(redistest.Files(t, srv.Dir), []byte(cid)) })
	if bytes.Contains(redistest.Files(t, srv.Dir), []byte(secret)) {
		t.Fatal("the question is on disk, readable")
	}

	if err := raw(t, srv).ConfigSet(ctx, "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Poll(t, "ready again", func() bool { return len(health.Check(ctx)) == 0 })
	checkLifecycle(t, h.events(alice, h.ask(alice, cid, secret)), gen.EventTypeAnswer) // nothing half-created stands in the way
	if logs := storeLogs.String(); !strings.Contains(logs, "no longer persists") {
		t.Errorf("the recovery is not logged: %s", logs)
	}
}
