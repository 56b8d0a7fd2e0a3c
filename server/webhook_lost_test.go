package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// TestWebhookOfAKeyedCreateWhoseOutcomeIsUnknown: a keyed create naming a webhook whose
// creation Redis ran but whose reply was lost answers 503, and the replica ends the ticket
// error{interrupted}. A retry with the key then answers that ticket (202), so its webhook must
// still deliver its end: before, the webhook was dropped with the 503, and the client that
// retried held an accepted ask whose webhook never came (nor showed on GET).
func TestWebhookOfAKeyedCreateWhoseOutcomeIsUnknown(t *testing.T) {
	srv := redistest.Start(t)
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	// No retry and a short read timeout: the lost reply is the creation's outcome, unknown.
	rc := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	st, err := redisstore.New(t.Context(), redisstore.Options{Client: rc, Prefix: "whlost:" + rand.Text() + ":", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	ends := make(chan ended, 4)
	h := newHarness(t, server.Options{Store: st, StoreWait: 5 * time.Second,
		Hooks:    server.Hooks{Ended: func(ticket string, e server.End) { ends <- ended{ticket, e} }},
		Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
	cid := h.conv(alice)
	warm := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q1?")
	_ = h.events(alice, warm)
	if got := <-ends; got.ticket != warm {
		t.Fatalf("ended %s first, want %s", got.ticket, warm)
	}

	const q = "How many sev1 incidents did we have in 2026-Q2? (keyed, its reply lost)"
	h.secret(q)
	p.DropReplies(1, q, faultproxy.Stall)
	r, err := h.cw.CreateAskWithResponse(context.Background(), cid, idemKey("lost-create-1"),
		gen.AskRequest{Question: q, Webhook: &gen.WebhookRequest{Url: rcv.URL() + "/hooks/lost"}}, bearer(alice))
	if err != nil {
		t.Fatal(err)
	}
	problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
	var ticket string
	select {
	case got := <-ends:
		if got.e.Error == nil || got.e.Error.Kind != gen.ErrorKindInterrupted {
			t.Fatalf("the late-made ticket ended %+v, want error{interrupted}", got.e)
		}
		ticket = got.ticket
	case <-time.After(20 * time.Second):
		t.Fatalf("the ticket made after its request gave up was not ended within 20 s\n%s", h.logs.String())
	}
	st2 := h.waitWebhook(alice, ticket)
	if st2.State != gen.WebhookStateDelivered {
		t.Fatalf("webhook of the late-made ticket %+v, want delivered", st2)
	}
	got := rcv.Deliveries()
	if len(got) != 1 || !got[0].Verified || !bytes.Contains(got[0].Body, []byte(`"kind":"interrupted"`)) || !bytes.Contains(got[0].Body, []byte(ticket)) {
		t.Fatalf("receiver got %d deliveries (%+v), want the late-made ticket's error{interrupted}", len(got), got)
	}
}
