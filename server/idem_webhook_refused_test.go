package server_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// refusingOutbox refuses its first webhook as a store at capacity does, then takes them.
type refusingOutbox struct {
	*store.MemoryOutbox
	refused atomic.Bool
}

func (o *refusingOutbox) AddWebhook(ctx context.Context, w store.Webhook) error {
	if o.refused.CompareAndSwap(false, true) {
		return store.ErrFull
	}
	return o.MemoryOutbox.AddWebhook(ctx, w)
}

// TestIdempotencyKeyWebhookRefusedLeavesNoRecord: a keyed ask whose webhook the store refuses
// (at capacity: nothing was created) records nothing under its key, as every other refusal,
// so its retry is processed afresh rather than answered 409 "still in progress" until the
// record's lock lapses.
func TestIdempotencyKeyWebhookRefusedLeavesNoRecord(t *testing.T) {
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	h := newHarness(t, server.Options{Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret),
		Outbox: &refusingOutbox{MemoryOutbox: store.NewMemoryOutbox()}}})
	h.secret(secret)
	cid := h.conv(alice)
	ask := func() *gen.CreateAskResponse {
		q := "the keyed question with a webhook"
		h.secret(q)
		r, err := h.cw.CreateAskWithResponse(t.Context(), cid, idemKey("hook-key"),
			gen.AskRequest{Question: q, Webhook: &gen.WebhookRequest{Url: rcv.URL() + "/hooks/a"}}, bearer(alice))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := ask(); r.StatusCode() < 400 {
		t.Fatalf("a refused webhook: %d %s, want a refusal", r.StatusCode(), r.Body)
	}
	r := ask()
	if r.StatusCode() != http.StatusAccepted {
		t.Fatalf("the retry: %d %s, want 202", r.StatusCode(), r.Body)
	}
	h.events(alice, r.JSON202.Ticket)
}
