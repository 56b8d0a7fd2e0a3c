package redis_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// TestOutboxContract runs the webhook outbox contract against Redis.
func TestOutboxContract(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Outbox(t, newStore(t, srv, redisstore.Options{}))
}

// TestOutboxTimesOnRedisClock: the due times and expiry a replica gives are read on its clock,
// and Redis judges them on its own; a replica whose clock is behind Redis's registered a
// delivery whose expiry Redis had passed (probed: askd 60 s behind, DAS_ASK_DEADLINE_S=20,
// DAS_ASK_TTL_S=10), which was gone at once, never sent, and a retry's due time came early by
// the lag. Here the caller's clock is an hour behind Redis's.
func TestOutboxTimesOnRedisClock(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, redisstore.Options{})
	behind := func() time.Time { return time.Now().Add(-time.Hour) }
	redisstore.SetClock(s, behind)

	tid := "t_clock" + rand.Text()
	now := behind()
	w := store.Webhook{Ticket: tid, ID: "msg_1", URL: "https://example.com/hook", Due: now.Add(time.Minute), Expires: now.Add(2 * time.Minute)}
	if err := s.AddWebhook(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Webhook(t.Context(), tid); err != nil {
		t.Fatalf("the delivery, two minutes from its expiry on the caller's clock: %v", err)
	}
	if got, err := s.ClaimWebhooks(t.Context(), "r1", time.Minute, 10); err != nil || len(got) != 0 {
		t.Fatalf("claimed %d deliveries (err %v) a minute before the first one is due; want none", len(got), err)
	}
	// Made due (its run ended), attempted, and failed: its retry is due a minute later.
	if err := s.WebhookDue(t.Context(), tid); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimWebhooks(t.Context(), "r1", time.Minute, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("claimed %d deliveries (err %v); want the one made due", len(got), err)
	}
	w = got[0]
	w.Attempts, w.LastStatus, w.Due = 1, 503, behind().Add(time.Minute)
	if err := s.RecordWebhook(t.Context(), "r1", w); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ClaimWebhooks(t.Context(), "r2", time.Minute, 10); err != nil || len(got) != 0 {
		t.Fatalf("claimed %d deliveries (err %v) a minute before the retry is due; want none", len(got), err)
	}
}
