package redis_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/seal"
	"github.com/das-ask/ask/store/storetest"
)

// TestRefusesQuestionsOnceRedisPersists: a memory-only store whose Redis begins to persist
// while it runs (CONFIG SET appendonly yes) notices it at its next check, says why at error
// level, and refuses every write that holds a question (a creation, an end) as
// store.ErrUnavailable and store.ErrWouldPersist, writing nothing: no file Redis writes holds
// the refused question. Appends and reads go on. Once Redis no longer persists (CONFIG SET
// appendonly no) the store takes questions again by itself. Found by a black-box audit: the
// persistence check ran only at the start.
func TestRefusesQuestionsOnceRedisPersists(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	logs := &logtest.Buffer{}
	s := newStore(t, srv, redisstore.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), PersistenceCheck: 20 * time.Millisecond})
	ctx := t.Context()
	storetest.MustConv(t, s, "c1", storetest.Alice)
	storetest.MustConv(t, s, "c2", storetest.Alice)
	if _, err := s.CreateTicket(ctx, questionTicket("t1", "c1", "What did the first question ask?"), store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := s.Refusing(ctx); got != "" {
		t.Fatalf("Refusing on a memory-only Redis: %q", got)
	}

	if err := rc.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Poll(t, "the store noticing Redis persists", func() bool { return s.Refusing(ctx) == redisstore.ReasonPersistsUnsealed })
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "persists to disk") {
		t.Errorf("no error line says why: %s", logs.String())
	}
	const secret = "Which secret project overran its budget?"
	_, err := s.CreateTicket(ctx, questionTicket("t2", "c2", secret), store.Limits{})
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, store.ErrWouldPersist) {
		t.Errorf("CreateTicket while Redis persists: %v, want ErrUnavailable and ErrWouldPersist", err)
	}
	if _, err := s.Ticket(ctx, "t2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused ticket: %v, want ErrNotFound (nothing created)", err)
	}
	turn := ask.Turn{Question: "What did the first question ask?", Outcome: gen.EventTypeAnswer, Text: "42"}
	if err := s.Finish(ctx, "t1", storetest.Tail(3), turn); !errors.Is(err, store.ErrWouldPersist) {
		t.Errorf("Finish while Redis persists: %v, want ErrWouldPersist (the turn holds the question)", err)
	}
	step := store.Event{Seq: 2, Type: gen.EventTypeStep, Data: []byte(`{"marker":"step-written-while-persisting"}`)}
	if err := s.Append(ctx, "t1", step); err != nil {
		t.Errorf("Append while Redis persists: %v (a step holds no question)", err)
	}
	if b, err := s.Read(ctx, "t1", 0); err != nil || len(b.Events) != 2 {
		t.Errorf("Read while Redis persists: %d events, %v", len(b.Events), err)
	}
	// What Redis writes from now on is on disk (appendfsync everysec): the step, never the
	// refused question.
	redistest.Poll(t, "the step reaching the AOF", func() bool {
		return bytes.Contains(redistest.Files(t, srv.Dir), []byte("step-written-while-persisting"))
	})
	if bytes.Contains(redistest.Files(t, srv.Dir), []byte(secret)) {
		t.Error("the refused question is on disk")
	}

	if err := rc.ConfigSet(ctx, "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Poll(t, "the store taking questions again", func() bool { return s.Refusing(ctx) == "" })
	if _, err := s.CreateTicket(ctx, questionTicket("t2", "c2", secret), store.Limits{}); err != nil {
		t.Errorf("CreateTicket once Redis no longer persists: %v", err)
	}
	if err := s.Finish(ctx, "t1", storetest.Tail(3), turn); err != nil {
		t.Errorf("Finish once Redis no longer persists: %v", err)
	}
	if !strings.Contains(logs.String(), "no longer persists") {
		t.Errorf("the recovery is not logged: %s", logs.String())
	}
}

// TestSealedStoreIgnoresPersistence: a store that seals is the durable mode: a Redis that
// persists refuses it nothing.
func TestSealedStoreIgnoresPersistence(t *testing.T) {
	srv := redistest.StartDurable(t)
	keys, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, srv, redisstore.Options{Seal: keys, PersistenceCheck: 20 * time.Millisecond})
	storetest.MustConv(t, s, "c", storetest.Alice)
	if _, err := s.CreateTicket(t.Context(), questionTicket("t", "c", "q"), store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := s.Refusing(t.Context()); got != "" {
		t.Errorf("Refusing of a sealed store: %q", got)
	}
}

// questionTicket is ticket id's creation in conv, asking question.
func questionTicket(id, conv, question string) store.NewTicket {
	acc, _ := json.Marshal(map[string]string{"question": question})
	return store.NewTicket{ID: id, ConversationID: conv, Owner: storetest.Alice, CreatedAt: time.Unix(1700000000, 0).UTC(),
		Accepted: store.Event{Seq: 1, Type: gen.EventTypeAccepted, Data: acc}, Question: question}
}

// TestRefusesQuestionsWhileRedisSyncsReplicasThroughAFile: a Redis that syncs its replicas
// through a file of its own (repl-diskless-sync no, Redis 6's default) writes all it holds to
// its dump.rdb at each replica's full sync and keeps the file: it persists, whatever save and
// appendonly say. Found from outside on 2026-12-05: askd ran in the memory-only mode on such a
// Redis, and a replica attaching left the question readable in the primary's dump.rdb. The
// store refuses it as a Redis that persists: at the start, and once found while running, when
// a replica's sync then writes no question.
func TestRefusesQuestionsWhileRedisSyncsReplicasThroughAFile(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	ctx := t.Context()
	if err := rc.ConfigSet(ctx, "repl-diskless-sync", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if s, err := redisstore.New(ctx, redisstore.Options{URL: srv.URL, Prefix: "test:replsync:"}); err == nil || !strings.Contains(err.Error(), "--repl-diskless-sync yes") {
		if err == nil {
			s.Close()
		}
		t.Fatalf("New on a Redis syncing replicas through a file: %v, want a refusal naming repl-diskless-sync", err)
	}

	if err := rc.ConfigSet(ctx, "repl-diskless-sync", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, srv, redisstore.Options{PersistenceCheck: 20 * time.Millisecond})
	storetest.MustConv(t, s, "c1", storetest.Alice)
	if err := rc.ConfigSet(ctx, "repl-diskless-sync", "no").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Poll(t, "the store noticing Redis syncs through a file", func() bool { return s.Refusing(ctx) == redisstore.ReasonPersistsUnsealed })
	const secret = "Which acquisition is the board weighing this quarter?"
	if _, err := s.CreateTicket(ctx, questionTicket("t1", "c1", secret), store.Limits{}); !errors.Is(err, store.ErrWouldPersist) {
		t.Fatalf("CreateTicket while Redis syncs through a file: %v, want ErrWouldPersist", err)
	}

	// A replica's full sync: the primary writes its snapshot, and keeps it (uncompressed, so
	// that a question in it would be found).
	if err := rc.ConfigSet(ctx, "rdbcompression", "no").Err(); err != nil {
		t.Fatal(err)
	}
	replica := redistest.Start(t)
	host, port, _ := strings.Cut(srv.Addr, ":")
	if err := raw(t, replica).Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Poll(t, "the primary writing a snapshot for its replica", func() bool {
		return bytes.Contains(redistest.Files(t, srv.Dir), []byte("test:"))
	})
	if bytes.Contains(redistest.Files(t, srv.Dir), []byte(secret)) {
		t.Error("the refused question is on the primary's disk")
	}
}
