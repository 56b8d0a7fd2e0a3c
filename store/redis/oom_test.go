package redis_test

import (
	"errors"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// TestFullRedis: a Redis at its maxmemory with noeviction, as docs/scale-out.md advises. Reads
// go on (a finished and a running ticket, their logs, a conversation), from a replica that has
// not read them before; writes are store.ErrUnavailable (the service answers 503 and a run
// retries them), never an error reply the service would answer 500 for; a delivery is still
// forgotten (a deletion frees memory); and once there is room again the running ticket's
// writes are taken. Found by a black-box audit: every read was a MULTI, whose commands a full
// Redis refuses, reads too (EXECABORT), and OOM was not unavailability.
func TestFullRedis(t *testing.T) {
	srv := redistest.Start(t)
	o := redisstore.Options{Prefix: "full:"}
	s := newStore(t, srv, o)
	ctx := t.Context()
	storetest.MustConv(t, s, "c1", storetest.Alice)
	storetest.MustConv(t, s, "c2", storetest.Alice)
	if _, err := storetest.NewTicket(t, s, "done", "c1", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, "done", storetest.Tail(2), ask.Turn{Question: "q1", Outcome: gen.EventTypeAnswer, Text: "42"}); err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.NewTicket(t, s, "run", "c2", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "run", storetest.Ev(2, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddWebhook(ctx, store.Webhook{ID: "w", Ticket: "run", URL: "https://example.test/hook"}); err != nil {
		t.Fatal(err)
	}

	makeRoom := redistest.Fill(t, srv)
	r := newStore(t, srv, o) // a replica with nothing read yet: every read goes to Redis
	for _, tc := range []struct {
		ticket   string
		last     int64
		finished bool
	}{{"done", 4, true}, {"run", 2, false}} {
		tk, err := r.Ticket(ctx, tc.ticket)
		if err != nil {
			t.Fatalf("Ticket(%s) on a full Redis: %v", tc.ticket, err)
		}
		if tk.LastSeq != tc.last || (tk.Done != nil) != tc.finished {
			t.Errorf("Ticket(%s): last %d, done %v; want %d, %v", tc.ticket, tk.LastSeq, tk.Done != nil, tc.last, tc.finished)
		}
		b, err := r.Read(ctx, tc.ticket, 0)
		if err != nil {
			t.Fatalf("Read(%s) on a full Redis: %v", tc.ticket, err)
		}
		if int64(len(b.Events)) != tc.last || b.Finished != tc.finished {
			t.Errorf("Read(%s): %d events, finished %v; want %d, %v", tc.ticket, len(b.Events), b.Finished, tc.last, tc.finished)
		}
	}
	if _, turns, err := r.Conversation(ctx, "c1"); err != nil || len(turns) != 1 {
		t.Errorf("Conversation on a full Redis: %d turns, %v; want 1", len(turns), err)
	}

	unavailable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s on a full Redis: %v, want store.ErrUnavailable", what, err)
		}
	}
	unavailable("CreateConversation", s.CreateConversation(ctx, store.Conversation{ID: "c3", Owner: storetest.Alice}, store.Limits{}))
	_, err := storetest.NewTicket(t, s, "next", "c1", storetest.Alice, store.Limits{})
	unavailable("CreateTicket", err)
	unavailable("Append", s.Append(ctx, "run", storetest.Ev(3, gen.EventTypeStep)))
	unavailable("Finish", s.Finish(ctx, "run", storetest.Tail(3), ask.Turn{Question: "q2", Outcome: gen.EventTypeAnswer}))
	if err := s.RemoveWebhook(ctx, "run"); err != nil {
		t.Errorf("RemoveWebhook on a full Redis: %v", err)
	}

	makeRoom()
	if err := s.Append(ctx, "run", storetest.Ev(3, gen.EventTypeStep)); err != nil {
		t.Fatalf("Append once there is room: %v", err)
	}
	if err := s.Finish(ctx, "run", storetest.Tail(4), ask.Turn{Question: "q2", Outcome: gen.EventTypeAnswer}); err != nil {
		t.Fatalf("Finish once there is room: %v", err)
	}
	if tk, err := r.Ticket(ctx, "run"); err != nil || tk.LastSeq != 6 || tk.Done == nil {
		t.Errorf("the running ticket once there is room: %+v, %v; want it finished at seq 6", tk, err)
	}
}
