//go:build !fuzzsmoke

package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
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

// restoreWatch is a replica's store that records when it refused a run's restore for lack of
// the store (store.ErrUnavailable) and says on late once a refusal comes later than after
// since the first one.
type restoreWatch struct {
	*redisstore.Store
	after time.Duration
	late  chan struct{}
	mu    sync.Mutex
	first time.Time
}

func (s *restoreWatch) Restore(ctx context.Context, nt store.NewTicket, tail []store.Event, turn ask.Turn) error {
	err := s.Store.Restore(ctx, nt, tail, turn)
	if errors.Is(err, store.ErrUnavailable) {
		s.mu.Lock()
		if s.first.IsZero() {
			s.first = time.Now()
		} else if time.Since(s.first) > s.after {
			select {
			case s.late <- struct{}{}:
			default:
			}
		}
		s.mu.Unlock()
	}
	return err
}

// TestRestoreWaitsForARedisThatPersists: an ask runs on a memory-only Redis (no seal keys),
// and Redis is killed and restarted on its port with appendonly yes. The runner's next write
// finds its ticket gone and restores it (run.restoreVia), a write that holds the question, which
// the store refuses while Redis persists, past the lease. Found by a black-box probe of the
// cluster: the runner gave the restore up after the lease ("ask not restored after the store
// lost its log", outcome store_error), so the ticket whose 202 was sent read 404 "lost" for
// good, even once Redis ran memory-only again, and its conversation had no turn. Now the
// restore waits for the store, as a run lost to a store away past its lease does
// (recoverLost): once Redis no longer persists, the ticket is there, ended error{interrupted}
// + done after every seq the client saw.
func TestRestoreWaitsForARedisThatPersists(t *testing.T) {
	srv := redistest.Start(t)
	lease := 500 * time.Millisecond
	st := &restoreWatch{
		Store: replicaStoreWith(t, srv, redisstore.Options{Prefix: "persistrestore:" + rand.Text() + ":", Lease: lease}),
		after: 3 * lease, late: make(chan struct{}, 1),
	}
	mid, resume := make(chan string, 1), make(chan struct{})
	ended := make(chan server.End, 4)
	h := newHarness(t, server.Options{Store: st, Runner: phasedRunner(2, 2, mid, resume),
		Hooks: server.Hooks{Ended: func(_ string, e server.End) { ended <- e }}})
	ticket := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "the run's first steps")
	seen := h.status(alice, ticket).JSON200.LastSeq

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.RestartDurable(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(resume)
	// The restore is refused for three leases: the run must not have ended meanwhile.
	select {
	case e := <-ended:
		t.Fatalf("the run ended (%+v) while the store refused its restore: the ticket reads 404 for good", e)
	case <-st.late:
	case <-time.After(30 * time.Second):
		t.Fatal("no restore refused three leases after the first")
	}
	if r := h.status(alice, ticket); r.StatusCode() != http.StatusNotFound {
		t.Fatalf("the ticket while Redis persists: %d %s, want 404 (not restored yet)", r.StatusCode(), r.Body)
	}

	if err := raw(t, srv).ConfigSet(t.Context(), "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ended:
		if !e.Restored || e.Outcome != gen.EventTypeError || e.Error == nil || e.Error.Kind != gen.ErrorKindInterrupted {
			t.Errorf("the run's end %+v, want it restored, ended error{interrupted}", e)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ask was not restored within 30s of Redis running memory-only again")
	}
	r := h.status(alice, ticket)
	if r.StatusCode() != http.StatusOK || r.JSON200 == nil || r.JSON200.State != gen.AskStateError {
		t.Fatalf("the ticket once restored: %d %s, want state error", r.StatusCode(), r.Body)
	}
	resp := h.stream(t.Context(), alice, ticket, nil)
	frames := readAll(t, resp.Body)
	_ = resp.Body.Close()
	if n := len(frames); n < 3 || frames[0].Event != "accepted" || frames[n-2].Event != "error" || frames[n-1].Event != "done" {
		t.Fatalf("restored log %v, want accepted … error, done", types(frames))
	}
	if e := decode(t, frames[len(frames)-2]); e.Kind != string(gen.ErrorKindInterrupted) || e.Seq <= seen {
		t.Errorf("terminal %s at seq %d, want interrupted after seq %d (the last the client saw)", e.Kind, e.Seq, seen)
	}
	// The conversation holds the ask's turn, once: the next ask there is admitted.
	if r := h.askRaw(alice, r.JSON200.ConversationId, "And in 2026-Q3?"); r.StatusCode() != http.StatusAccepted {
		t.Errorf("the next ask in the restored conversation: %d %s", r.StatusCode(), r.Body)
	}
}
