package server_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// dropFailsStore is a shared Redis store whose CreateTicket makes the ticket but answers that
// its outcome is pending (a store that stalled at StoreWait), and whose first RemoveWebhook
// calls fail as a store still away does.
type dropFailsStore struct {
	*redisstore.Store
	fails atomic.Int64
}

func (s *dropFailsStore) CreateTicket(ctx context.Context, nt store.NewTicket, l store.Limits) ([]ask.Turn, error) {
	if _, err := s.Store.CreateTicket(ctx, nt, l); err != nil {
		return nil, err
	}
	return nil, &store.PendingError{Outcome: func(context.Context) error { return nil }}
}

func (s *dropFailsStore) RemoveWebhook(ctx context.Context, ticket string) error {
	if s.fails.Add(-1) >= 0 {
		return fmt.Errorf("remove webhook: %w", store.ErrUnavailable)
	}
	return s.Store.RemoveWebhook(ctx, ticket)
}

// TestLateCreatesWebhookRemovalIsRetried: an ask without a key whose create the store took
// after its request answered 503 "not started" is ended unrun; its webhook, which nobody is to
// hear of, must be gone before that end makes it due. The removal meets the same store that
// just stalled: when it fails, it is retried until the store answers, as the end is. Before,
// one failed removal was logged ('it expires unsent') and the end then made the delivery due,
// so the receiver heard of an ask its caller was told was not started.
func TestLateCreatesWebhookRemovalIsRetried(t *testing.T) {
	srv := redistest.Start(t)
	st := &dropFailsStore{Store: replicaStore(t, srv, "whdrop:"+rand.Text()+":", time.Minute)}
	st.fails.Store(2)
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	ends := make(chan ended, 4)
	h := newHarness(t, server.Options{Store: st, StoreWait: 300 * time.Millisecond,
		Hooks:    server.Hooks{Ended: func(ticket string, e server.End) { ends <- ended{ticket, e} }},
		Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
	cid := h.conv(alice)
	const q = "How many sev1 incidents did we have in 2026-Q2? (late, removal fails)"
	h.secret(q)
	r, err := h.cw.CreateAskWithResponse(t.Context(), cid, nil,
		gen.AskRequest{Question: q, Webhook: &gen.WebhookRequest{Url: rcv.URL() + "/hooks/late"}}, bearer(alice))
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
	case <-time.After(20 * time.Second): // a bound for the failure only; the lease is a minute
		t.Fatalf("the late-made ticket was not ended within 20 s\n%s", h.logs.String())
	}
	if st.fails.Load() == 2 {
		t.Fatal("RemoveWebhook was never called: the test did not exercise its failure")
	}
	if w, err := st.Webhook(t.Context(), ticket); err == nil {
		t.Errorf("the late-made ticket ended with its webhook still in the outbox (%s): it is delivered to a receiver whose caller was told the ask was not started", w.State)
	}
}
