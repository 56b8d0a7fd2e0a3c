package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
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
	h, rcv, ends := webhookHarness(t, st, 5*time.Second)
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
	ticket := lateEnd(t, h, ends)
	st2 := h.waitWebhook(alice, ticket)
	if st2.State != gen.WebhookStateDelivered {
		t.Fatalf("webhook of the late-made ticket %+v, want delivered", st2)
	}
	got := rcv.Deliveries()
	if len(got) != 1 || !got[0].Verified || !bytes.Contains(got[0].Body, []byte(`"kind":"interrupted"`)) || !bytes.Contains(got[0].Body, []byte(ticket)) {
		t.Fatalf("receiver got %d deliveries (%+v), want the late-made ticket's error{interrupted}", len(got), got)
	}
}

// pendingStore is a shared Redis store whose CreateTicket makes the ticket but answers, as a
// stalled store does at StoreWait, that its outcome is pending; remove, when set, is called
// before its RemoveWebhook, which fails with remove's error (a store still away).
type pendingStore struct {
	*redisstore.Store
	remove func(ctx context.Context) error
}

func (s *pendingStore) CreateTicket(ctx context.Context, nt store.NewTicket, l store.Limits) ([]ask.Turn, error) {
	if _, err := s.Store.CreateTicket(ctx, nt, l); err != nil {
		return nil, err
	}
	return nil, &store.PendingError{Outcome: func(context.Context) error { return nil }}
}

func (s *pendingStore) RemoveWebhook(ctx context.Context, ticket string) error {
	if s.remove != nil {
		if err := s.remove(ctx); err != nil {
			return err
		}
	}
	return s.Store.RemoveWebhook(ctx, ticket)
}

// webhookHarness is a harness on st, with StoreWait wait, whose asks may name a webhook to the
// receiver it returns, and whose ends are reported on the channel it returns.
func webhookHarness(t *testing.T, st store.Store, wait time.Duration) (*harness, *webhooktest.Receiver, chan ended) {
	t.Helper()
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	ends := make(chan ended, 4)
	h := newHarness(t, server.Options{Store: st, StoreWait: wait,
		Hooks:    server.Hooks{Ended: func(ticket string, e server.End) { ends <- ended{ticket, e} }},
		Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
	return h, rcv, ends
}

// lateEnd is the ticket that a create answered 503 made after all, once h ended it unrun with
// error{interrupted}.
func lateEnd(t *testing.T, h *harness, ends <-chan ended) string {
	t.Helper()
	select {
	case got := <-ends:
		if got.e.Error == nil || got.e.Error.Kind != gen.ErrorKindInterrupted {
			t.Fatalf("the late-made ticket ended %+v, want error{interrupted}", got.e)
		}
		return got.ticket
	case <-time.After(20 * time.Second): // a bound for the failure only: the lease would end it in a minute
		t.Fatalf("the late-made ticket was not ended within 20 s\n%s", h.logs.String())
		return ""
	}
}

// TestWebhookDropDoesNotHoldTheLate503: an ask naming a webhook whose create the store did not
// answer in time is a 503 at once, not after the webhook's removal from the same stalled store
// (it waited on it with no bound), and, as the caller holds no ticket, the one the store made
// after all is ended without its webhook being sent.
func TestWebhookDropDoesNotHoldTheLate503(t *testing.T) {
	srv := redistest.Start(t)
	back := make(chan struct{}) // closed: the store answers RemoveWebhook again
	st := &pendingStore{Store: replicaStore(t, srv, "whlate:"+rand.Text()+":", time.Minute), remove: func(ctx context.Context) error {
		select {
		case <-back:
			return nil
		case <-ctx.Done():
			return stalled(ctx)
		}
	}}
	h, rcv, ends := webhookHarness(t, st, 300*time.Millisecond)
	cid := h.conv(alice)
	const q = "How many sev1 incidents did we have in 2026-Q2? (late)"
	h.secret(q)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := h.cw.CreateAskWithResponse(ctx, cid, nil,
		gen.AskRequest{Question: q, Webhook: &gen.WebhookRequest{Url: rcv.URL() + "/hooks/late"}}, bearer(alice))
	if err != nil {
		t.Fatalf("the create did not answer within 10 s (StoreWait is 300 ms): %v", err)
	}
	problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
	close(back)
	ticket := lateEnd(t, h, ends)
	// Its webhook was removed before its end could make it due.
	if w, err := st.Webhook(t.Context(), ticket); err == nil {
		t.Errorf("the late-made ticket still has a webhook delivery %+v", w)
	}
	if n := len(rcv.Deliveries()); n != 0 {
		t.Errorf("the receiver got %d deliveries for a ticket its caller was told was not started", n)
	}
}
