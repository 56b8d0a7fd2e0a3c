package redis_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestOutboxLostReplies: the outbox's writes, each with its reply lost once (go-redis
// reconnects and runs the script again), answer as the first run did. A registration answered
// ErrConflict failed its createAsk with a 500 (the ask's own delivery taken for another's), and a
// recorded attempt answered ErrNotHeld was logged as superseded and never counted as ended.
func TestOutboxLostReplies(t *testing.T) {
	srv := redistest.Start(t)
	for _, then := range []faultproxy.Then{faultproxy.Close, faultproxy.Stall} {
		t.Run(then.String(), func(t *testing.T) {
			ctx := t.Context()
			s, p := behindProxy(t, srv, redisstore.Options{})
			now := time.Now()
			// Once through, so the scripts are loaded: a lost reply to a NOSCRIPT would
			// prove nothing.
			warm := store.Webhook{Ticket: "t_" + rand.Text(), ID: "msg_" + rand.Text(), URL: "https://h.example/x", Due: now.Add(time.Hour), Expires: now.Add(time.Hour)}
			if err := s.AddWebhook(ctx, warm); err != nil {
				t.Fatal(err)
			}
			if err := s.RecordWebhook(ctx, "nobody", warm); err == nil {
				t.Fatal("recorded without a claim")
			}
			w := store.Webhook{Ticket: "t_" + rand.Text(), ID: "msg_lost" + rand.Text(), URL: "https://h.example/x",
				Due: now, Expires: now.Add(time.Hour)}

			p.DropReplies(1, w.ID, then)
			if err := s.AddWebhook(ctx, w); err != nil {
				t.Fatalf("AddWebhook through a lost reply: %v, want ok (the delivery it registered)", err)
			}
			dropped(t, p, 1)
			other := w
			other.ID = "msg_other" + rand.Text()
			if err := s.AddWebhook(ctx, other); err == nil {
				t.Fatal("a second registration for the ticket, under another id, was taken")
			}

			holder := "holder-lost" + rand.Text()
			got, err := s.ClaimWebhooks(ctx, holder, time.Minute, 100)
			if err != nil || len(got) != 1 || got[0].ID != w.ID {
				t.Fatalf("claim = %+v, %v; want the delivery", got, err)
			}
			rec := got[0]
			rec.State, rec.Attempts, rec.LastStatus, rec.DeliveredAt, rec.Due = gen.WebhookStateDelivered, 1, 204, time.Now(), time.Time{}
			p.DropReplies(1, holder, then)
			if err := s.RecordWebhook(ctx, holder, rec); err != nil {
				t.Fatalf("RecordWebhook through a lost reply: %v, want ok (the attempt it recorded)", err)
			}
			dropped(t, p, 2)
			if got, err := s.Webhook(ctx, w.Ticket); err != nil || got.State != gen.WebhookStateDelivered || got.Attempts != 1 || got.ID != w.ID {
				t.Fatalf("after the record: %+v, %v", got, err)
			}
			if err := s.RecordWebhook(ctx, "someone-else", rec); err == nil {
				t.Fatal("a caller that never held the delivery recorded on it")
			}
		})
	}
}
